"""Multigrid for the steady state (and, through the same solver, implicit heat steps): the Jacobi
kernels of every backend as smoother, levels as plain data (levels.py), one cycle for every backend and
rank count (cycle.py). Imports core, backends and parallel; run.py imports it."""
