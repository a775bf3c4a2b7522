"""Input limits shared by the case model, the command line, the environment and the caches."""

MAX_THREADS = 1 << 16  # numba threads per rank, from any source (case, options, OMP_NUM_THREADS, caches)
MAX_TIME_TILE = 64  # numba steps per sweep (and halo depth under MPI): backend.time_tile, --time-tile, tiles.json
