#!/usr/bin/env bash
# A cluster emulated on this machine (root): each "node" is a Linux network namespace with a UTS
# namespace of its own (so its own host name), joined to the others through a bridge in the root
# namespace by a veth pair whose bandwidth `tc` shapes (tbf, both directions; this kernel has no netem,
# so the latency is the TCP path's own). MPI sees separate nodes: host names differ, so shared memory is
# used only inside a node, and TCP (libfabric's tcp provider, MPIR_CVAR_CH4_NETMOD=ofi) between them.
#
#   tools/cluster.sh check               can namespaces be made here? exit 0, or print why not and exit 1
#   tools/cluster.sh up [NODES] [RATE]   build NODES nodes (default 2, at most 64); RATE shapes every link (e.g.
#                                        1gbit; none: unshaped). Arguments are checked before anything is made, and
#                                        an `up` that fails half-way removes what it made (and nothing else)
#   tools/cluster.sh shape RATE|none     reshape every link (tbf rate, e.g. 10gbit), or remove the shaping
#   tools/cluster.sh status              nodes, addresses, cores, shaping
#   tools/cluster.sh down                remove every namespace, veth pair and the bridge it made
#   tools/cluster.sh -n P [ARGS] CMD...  an MPI launcher (the venv's MPICH mpiexec): P ranks spread over
#                                        the nodes in blocks of ceil(P / NODES), ranks 0.. on node1
#   tools/cluster.sh exec NODE CMD...    run CMD inside node NODE (1, 2, ...)
#
# Each node gets its share of this machine's cores (cores split evenly, in order; STENCIL_CLUSTER_CORES=all
# gives every node all cores), so nodes do not time-share a core with each other. Names: STENCIL_CLUSTER
# (prefix, default stn: namespaces stn1, stn2, ..., bridge stnbr, veth stn1h/stn1n), addresses
# STENCIL_CLUSTER_NET.N (default 10.77.0.N, the bridge .254). State: /run/stencil-cluster/PREFIX.env.
# Used as a sweep launcher: stencil sweep strong CASE --ranks 2,4 --launcher tools/cluster.sh
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
P=${STENCIL_CLUSTER:-stn}
NET=${STENCIL_CLUSTER_NET:-10.77.0}
STATE_DIR=/run/stencil-cluster
STATE=$STATE_DIR/$P.env
BR=${P}br

MAX_NODES=64  # each node is a namespace, a veth pair and a share of the cores; more take long to build and share

die() { echo "cluster.sh: $*" >&2; exit 1; }
usage() { echo "cluster.sh: $*" >&2; exit 2; }  # a bad argument: one line, exit 2, nothing made

check_nodes() {  # check_nodes N: a whole number 1..MAX_NODES
  [[ $1 =~ ^[0-9]+$ ]] && (( 10#$1 >= 1 && 10#$1 <= MAX_NODES )) ||
    usage "NODES: '$1' is not a number of nodes; give a whole number from 1 to $MAX_NODES, e.g. up 2"
}

check_rate() {  # check_rate RATE: none, or a tc rate (a number and a unit: bit, kbit, mbit, gbit, tbit, bps, kbps...)
  [[ $1 == none || $1 =~ ^[0-9]+(\.[0-9]+)?([kKmMgGtT]i?)?(bit|bps)$ ]] ||
    usage "RATE: '$1' is not a link rate; give a number with a unit (e.g. 1gbit, 100mbit, 25gbit) or none"
}

check_names() {  # what STENCIL_CLUSTER and STENCIL_CLUSTER_NET make: interface names of at most 15 characters, an address
  [[ $P =~ ^[a-z][a-z0-9]{0,8}$ ]] ||
    usage "STENCIL_CLUSTER: '$P' is not a prefix; give 1 to 9 lower-case letters or digits, starting with a letter"
  [[ $NET =~ ^([0-9]{1,3})\.([0-9]{1,3})\.([0-9]{1,3})$ ]] && (( BASH_REMATCH[1] <= 255 && BASH_REMATCH[2] <= 255 &&
    BASH_REMATCH[3] <= 255 )) || usage "STENCIL_CLUSTER_NET: '$NET' is not the first three numbers of an IPv4 address; e.g. 10.77.0"
}

check() {  # why namespaces cannot be made here (nothing printed: they can)
  [[ $(id -u) == 0 ]] || { echo "not root (network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN)"; return; }
  for tool in ip tc unshare; do command -v $tool > /dev/null || { echo "$tool is not installed"; return; }; done
  local probe=${P}probe$$
  if ! err=$(ip netns add "$probe" 2>&1); then echo "ip netns add failed: $err"; return; fi
  if ! err=$(ip netns exec "$probe" unshare --uts true 2>&1); then
    ip netns del "$probe"; echo "unshare --uts failed: $err"; return
  fi
  # (links named by this process too: two checks at once, as pytest's workers collecting tests/test_cluster.py make,
  # would otherwise race for one name, and the loser would report that namespaces cannot be made here)
  if ! err=$(ip link add "${P}v$$" type veth peer name "${P}w$$" 2>&1); then
    ip netns del "$probe"; echo "ip link add (veth) failed: $err"; return
  fi
  ip link del "${P}v$$"; ip netns del "$probe"
  ip link add "${P}b$$" type bridge 2>/dev/null && ip link del "${P}b$$" || echo "ip link add (bridge) failed"
}

cores_of() {  # cores_of NODE NODES: this node's share of the machine's cores, as a taskset list
  local i=$1 n=$2 c
  c=$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)  # nproc counts OMP_NUM_THREADS, not cores, when it is set
  if [[ ${STENCIL_CLUSTER_CORES:-split} == all ]] || (( c < n )); then echo "0-$((c - 1))"; return; fi
  echo "$(( (i - 1) * c / n ))-$(( i * c / n - 1 ))"
}

shape_link() {  # shape_link DEV RATE: tbf on one device (RATE none: no shaping)
  tc qdisc del dev "$1" root 2>/dev/null || true
  [[ $2 == none ]] || tc qdisc add dev "$1" root tbf rate "$2" burst "${STENCIL_CLUSTER_BURST:-256kb}" latency 100ms
}

MADE=()  # what this `up` made, newest last: undone in reverse if it fails half-way

undo() {  # the EXIT trap of a failed `up`: remove what it made (namespaces and links made before it are kept)
  local rc=$? k
  trap - EXIT
  (( rc == 0 )) && return
  for ((k = ${#MADE[@]} - 1; k >= 0; k--)); do
    case ${MADE[k]} in
      netns:*) ip netns del "${MADE[k]#netns:}" 2>/dev/null || true ;;
      link:*) ip link del "${MADE[k]#link:}" 2>/dev/null || true ;;
      file:*) rm -f "${MADE[k]#file:}" ;;
    esac
  done
  echo "cluster.sh: up failed (exit $rc); removed what it had made" >&2
  exit "$rc"
}

up() {
  (( $# <= 2 )) || usage "up takes at most NODES and RATE, not '$*'; e.g. up 2 1gbit"
  local n=${1:-2} rate=${2:-none} i
  check_nodes "$n"
  check_rate "$rate"
  check_names
  n=$((10#$n))
  [[ -z $(check) ]] || die "cannot build the cluster: $(check)"
  [[ ! -f $STATE ]] || die "a cluster named $P exists already ($STATE); tools/cluster.sh down first"
  ! ip link show "$BR" > /dev/null 2>&1 || die "a link named $BR exists already; tools/cluster.sh down, or another STENCIL_CLUSTER"
  trap undo EXIT
  mkdir -p "$STATE_DIR"
  MADE+=("file:$STATE")
  printf 'NODES=%s\nRATE=%s\nNET=%s\n' "$n" "$rate" "$NET" > "$STATE"
  MADE+=("link:$BR")
  ip link add "$BR" type bridge
  ip addr add "$NET.254/24" dev "$BR"
  ip link set "$BR" up
  for ((i = 1; i <= n; i++)); do
    ip netns add "$P$i"
    MADE+=("netns:$P$i" "link:$P${i}h")
    ip link add "$P${i}h" type veth peer name "$P${i}n"
    ip link set "$P${i}n" netns "$P$i"
    ip link set "$P${i}h" master "$BR" up
    ip netns exec "$P$i" ip addr add "$NET.$i/24" dev "$P${i}n"
    ip netns exec "$P$i" ip link set "$P${i}n" up
    ip netns exec "$P$i" ip link set lo up
    echo "CORES$i=$(cores_of "$i" "$n")" >> "$STATE"
  done
  shape "$rate"
  status
  trap - EXIT
}

shape() {
  (( $# == 1 )) || usage "shape takes one RATE (e.g. shape 10gbit, or shape none)"
  local rate=$1 i
  check_rate "$rate"
  load
  for ((i = 1; i <= NODES; i++)); do
    shape_link "$P${i}h" "$rate"  # towards the node
    ip netns exec "$P$i" bash -c "$(declare -f shape_link); STENCIL_CLUSTER_BURST=${STENCIL_CLUSTER_BURST:-256kb} shape_link $P${i}n $rate"  # from it
  done
  sed -i "s/^RATE=.*/RATE=$rate/" "$STATE"
}

down() {  # everything this prefix made, also after a half-finished `up`
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$P[0-9]+$" || true); do
    ip link del "${ns}h" 2>/dev/null || true
    ip netns del "$ns"
  done
  ip link del "$BR" 2>/dev/null || true
  rm -f "$STATE"
}

load() {
  [[ -f $STATE ]] || die "no cluster named $P: tools/cluster.sh up first"
  # shellcheck disable=SC1090
  source "$STATE"
}

status() {
  load
  echo "cluster $P: $NODES node(s) on bridge $BR ($NET.254), links shaped to $RATE"
  for ((i = 1; i <= NODES; i++)); do
    local c="CORES$i"
    echo "  node$i: namespace $P$i, address $NET.$i, cores ${!c}, qdisc $(tc qdisc show dev "$P${i}h" | head -1)"
  done
}

launch() {  # launch -n P [mpiexec args] CMD...: the venv's mpiexec (MPICH hydra) over the nodes
  [[ ${2:-} =~ ^[1-9][0-9]{0,5}$ ]] || usage "-n: '${2:-}' is not a number of ranks; e.g. -n 4 python3 -c ..."
  (( $# >= 3 )) || usage "-n $2: give the command to run, e.g. -n $2 python3 -c 'print(1)'"
  load
  local p=$2
  shift 2
  local per=$(( (p + NODES - 1) / NODES )) hosts="" i
  for ((i = 1; i <= NODES; i++)); do hosts+="${hosts:+,}node$i"; done
  local exe=${STENCIL_CLUSTER_MPIEXEC:-$(dirname "$(command -v python3)")/mpiexec}
  [[ -x $exe ]] || exe=$(command -v mpiexec) || die "no mpiexec on PATH"
  export STENCIL_CLUSTER=$P STENCIL_CLUSTER_LINK=$RATE MPIR_CVAR_CH4_NETMOD=ofi FI_PROVIDER=tcp
  exec "$exe" -launcher ssh -launcher-exec "$HERE/cluster_ssh.sh" -hosts "$hosts" -iface "$BR" -ppn "$per" -n "$p" "$@"
}

node_exec() {  # node_exec NODE CMD...: CMD in that node (its namespace, host name and cores)
  [[ ${1:-} =~ ^[0-9]+$ ]] || usage "exec: '${1:-}' is not a node number; e.g. exec 1 hostname"
  (( $# >= 2 )) || usage "exec $1: give the command to run, e.g. exec $1 hostname"
  load
  (( 10#$1 >= 1 && 10#$1 <= NODES )) || usage "exec: node $1 is not a node of this cluster; give 1 to $NODES"
  local i=$((10#$1)) c="CORES$((10#$1))"
  shift
  exec ip netns exec "$P$i" unshare --uts sh -c "hostname node$i; exec taskset -c ${!c} \"\$@\"" sh "$@"
}

case ${1:-} in
  check) why=$(check); [[ -z $why ]] && { echo "network namespaces can be made here"; exit 0; }; echo "$why"; exit 1 ;;
  up) shift; up "$@" ;;
  shape) shift; shape "$@" ;;
  down) down ;;
  status) status ;;
  exec) shift; node_exec "$@" ;;
  -n) launch "$@" ;;
  *) sed -n '2,/^[^#]/{/^#/p}' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
esac
