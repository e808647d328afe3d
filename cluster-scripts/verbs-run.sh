#!/usr/bin/env bash
# One task of a verbs measurement (started once per node by verbs-slurm.sbatch or
# verbs-mpirun.sh), each result one JSON line in $FTCOLL_OUT/<host>.<rank>.jsonl:
#   logp-nodes  `ftcoll logp --rendezvous`: LogP between nodes, rank 0 against every other
#               rank (QP data exchanged through $FTCOLL_OUT/rendezvous: FTCOLL_OUT must be on
#               a file system all nodes see); rank 0's line holds the results
#   logp        `ftcoll logp`: LogP through this node's HCA (two endpoints, HCA loopback)
#   bench       `ftcoll bench`: broadcasts on a local cluster of endpoints on this node's HCA
#
# Environment (all optional except FTCOLL_OUT):
#   FTCOLL            the ftcoll binary (built with --features rdma)   [ftcoll on PATH]
#   FTCOLL_OUT        result directory, shared or node-local            (required)
#   FTCOLL_DEVICE     RDMA device, e.g. mlx5_0                          [first device]
#   FTCOLL_PORT       device port                                       [first active]
#   FTCOLL_GID_INDEX  GID index (RoCE v2: usually 3 or 1, see show_gids) [IB: LID; RoCE: first]
#   FTCOLL_CORES      cores to pin this task to (taskset -c list); give at least two:
#                     logp and bench run busy-polling threads that must not share a core
#                     (e.g. 2,3)                                         [no pinning]
#   FTCOLL_TRANSPORT  verbs, or udp for a dry run of the scripts        [verbs]
#   FTCOLL_BIND       udp dry run across hosts: this host's IP           [127.0.0.1]
#   FTCOLL_LOGP_ARGS  extra flags for `ftcoll logp`                     [none]
#   FTCOLL_BENCH_ARGS extra flags for `ftcoll bench`                    [none]
set -euo pipefail

: "${FTCOLL_OUT:?set FTCOLL_OUT to the result directory}"
bin=${FTCOLL:-ftcoll}
transport=${FTCOLL_TRANSPORT:-verbs}
rank=${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-${PMI_RANK:-0}}}
size=${SLURM_NTASKS:-${OMPI_COMM_WORLD_SIZE:-${PMI_SIZE:-1}}}
host=$(hostname -s)
mkdir -p "$FTCOLL_OUT"
out="$FTCOLL_OUT/$host.$rank.jsonl"

flags=(--transport "$transport")
if [ "$transport" = verbs ]; then
    [ -n "${FTCOLL_DEVICE:-}" ] && flags+=(--device "$FTCOLL_DEVICE")
    [ -n "${FTCOLL_PORT:-}" ] && flags+=(--port "$FTCOLL_PORT")
    [ -n "${FTCOLL_GID_INDEX:-}" ] && flags+=(--gid-index "$FTCOLL_GID_INDEX")
fi
pin=()
[ -n "${FTCOLL_CORES:-}" ] && pin=(taskset -c "$FTCOLL_CORES")

run() { # name, then the ftcoll command line
    local name=$1
    shift
    local json
    if json=$("${pin[@]}" "$bin" "$@" --json 2>"$out.$name.err"); then
        printf '{"host":"%s","rank":%s,"run":"%s","result":%s}\n' "$host" "$rank" "$name" "$json" >>"$out"
        rm -f "$out.$name.err"
    else
        echo "$host rank $rank: ftcoll $name failed: $(cat "$out.$name.err")" >&2
        return 1
    fi
}

# Between nodes first: every task starts it at the same time.
if [ "$size" -gt 1 ]; then
    between=(--rendezvous "$FTCOLL_OUT/rendezvous" --rendezvous-timeout 300)
    [ -n "${FTCOLL_BIND:-}" ] && [ "$transport" = udp ] && between+=(--bind "$FTCOLL_BIND")
    # shellcheck disable=SC2086  # the extra flags are meant to split
    run logp-nodes logp "${flags[@]}" "${between[@]}" ${FTCOLL_LOGP_ARGS:-}
fi
# shellcheck disable=SC2086
run logp logp "${flags[@]}" ${FTCOLL_LOGP_ARGS:-}
# shellcheck disable=SC2086
run bench bench "${flags[@]}" ${FTCOLL_BENCH_ARGS:-}
