"""Everything MPI: the communicator (every collective and message tag), halo exchange (modes x transports),
dynamic row balancing. Imports core and backends (for buffers); never io, results or above.
"""
