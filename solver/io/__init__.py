"""Files: the loop's output hooks, fields.h5, checkpoint.h5, VTK, XDMF, timings.h5, safe writes and agreed
output failures. Imports core and parallel.
"""
