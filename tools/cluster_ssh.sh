#!/usr/bin/env bash
# The "ssh" that MPICH's launcher (hydra, `-launcher ssh -launcher-exec tools/cluster_ssh.sh`) calls to
# start its proxy on a node of the emulated cluster (tools/cluster.sh): it drops ssh's options, maps
# host nodeN to namespace ${STENCIL_CLUSTER}N and runs the command there with host name nodeN, on that
# node's cores. The proxy keeps the descriptors hydra gave it (its PMI connection).
set -eu
while [[ $# -gt 0 && $1 == -* ]]; do shift; done  # ssh options (hydra passes -x)
host=${1:?no host}
shift
i=${host#node}
[[ $i =~ ^[0-9]+$ ]] || { echo "cluster_ssh.sh: host $host is not nodeN" >&2; exit 255; }
exec "$(dirname "$0")/cluster.sh" exec "$i" sh -c "$*"
