# Sourced by the CPU scaling scripts: `launch` = the mpirun command line for this MPI, ranks bound to
# cores (BIND overrides the binding), the variables a rank needs passed on (Open MPI), root allowed.
if mpirun --version 2>&1 | grep -q "Open MPI\|OpenRTE"; then
  launch=(mpirun --oversubscribe ${BIND:---bind-to core --map-by core} -x PYTHONPATH -x STENCIL_CACHE_DIR -x NUMBA_NUM_THREADS)
  [ "$(id -u)" = 0 ] && launch+=(--allow-run-as-root)
else
  launch=(mpirun ${BIND:--bind-to core})
fi
