"""Print what solver.parallel.gpu_exchange.cuda_aware_mpi() finds in the MPI library this process loaded."""

import json

from mpi4py import MPI

from solver.parallel.gpu_exchange import _loaded_libmpi, cuda_aware_mpi

libs = _loaded_libmpi()
print(json.dumps({"library": libs[0] if libs else "", "cuda_aware": cuda_aware_mpi(),
                  "mpi": MPI.Get_library_version().splitlines()[0]}))
