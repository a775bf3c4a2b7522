"""stencil: one verifiable 2D heat / Jacobi problem through numpy, numba, CuPy, MPI and MPI+GPU.

The distribution is `stencil` (the command), the package `solver`; its Python API is `solver.api`
(docs/python.md). Importing this package initialises neither MPI nor a GPU; mpi4py, cupy, numba and
pyvista are imported where they are used.
"""

__version__ = "0.1.0"
