"""Measurements beyond a run: copy/SAXPY ceilings, the ladder (reductions, vectorisation), the stencil kernel
alone, GPU benchmarks and tuning. Imports everything below run.py except sweep and cli.
"""
