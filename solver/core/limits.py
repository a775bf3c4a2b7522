"""Input limits shared by the case model, the command line, the environment and the caches."""

MAX_THREADS = 1 << 16  # numba threads per rank, from any source (case, options, OMP_NUM_THREADS, caches)
MAX_TIME_TILE = 64  # numba steps per sweep (and halo depth under MPI): backend.time_tile, --time-tile, tiles.json
MAX_RANKS = 1 << 16  # ranks of a run, a plan (validate) or a prediction (model): every rank lists every rank's block
# (core.decomp.all_blocks) and the model simulates each rank; at 65536 (4096 nodes x 16, the largest the docs
# predict) `stencil model` answers in about 10 s on a 2-core VM
MAX_LENGTH = 1e100  # lx, ly, alpha, dt, widths and radii between 1/MAX_LENGTH and MAX_LENGTH: their squares stay normal floats
