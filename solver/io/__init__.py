"""Files: the loop's output hooks, fields.h5, checkpoint.h5, VTK, XDMF, timings.h5, safe writes and agreed
output failures, the output directory's checks, lock and manifest (claim). Imports core and parallel.
"""
