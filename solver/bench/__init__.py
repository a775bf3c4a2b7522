"""Measurements beyond a run: copy/SAXPY ceilings, the ladder (access order, reductions, vectorisation),
the stencil kernel alone, CPU tile tuning, GPU benchmarks and tuning. Imports core, backends, config and
parallel; one exception: bench/gpu.py, the device suite's driver (`python -m solver.bench.gpu`), times
whole runs through run.run_case.
"""
