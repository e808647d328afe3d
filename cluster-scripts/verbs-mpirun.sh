#!/usr/bin/env bash
# mpirun wrapper: `ftcoll logp` and `ftcoll bench` over ibverbs on N nodes (one process per
# node), results collected in one directory.
#
#   cluster-scripts/verbs-mpirun.sh N [HOSTFILE]
#   FTCOLL_DEVICE=mlx5_0 FTCOLL_GID_INDEX=3 FTCOLL_CORES=2,3 cluster-scripts/verbs-mpirun.sh 4 hosts
#
# Environment: see verbs-run.sh; FTCOLL_RESULTS [./ftcoll-results]; MPIRUN [mpirun]. The result
# directory must be on a file system every node sees (or collect the per-node files yourself).
set -euo pipefail

n=${1:?usage: verbs-mpirun.sh N [HOSTFILE]}
hostfile=${2:-}
case $n in '' | *[!0-9]*) echo "verbs-mpirun.sh: N must be a number, got '$n'" >&2; exit 2 ;; esac

here=$(cd "$(dirname "$0")" && pwd)
export FTCOLL=${FTCOLL:-$(cd "$here/.." && pwd)/target/release/ftcoll}
stamp=$(date -u +%Y%m%dT%H%M%SZ)
export FTCOLL_OUT=${FTCOLL_RESULTS:-$(pwd)/ftcoll-results}/verbs-$stamp-$$
mkdir -p "$FTCOLL_OUT"
"$FTCOLL" --version >"$FTCOLL_OUT/version.txt"

args=(-np "$n" --map-by ppr:1:node --bind-to none)
[ -n "$hostfile" ] && args+=(--hostfile "$hostfile")
for v in FTCOLL FTCOLL_OUT FTCOLL_DEVICE FTCOLL_PORT FTCOLL_GID_INDEX FTCOLL_CORES FTCOLL_TRANSPORT FTCOLL_BIND FTCOLL_LOGP_ARGS FTCOLL_BENCH_ARGS; do
    [ -n "${!v:-}" ] && args+=(-x "$v")
done
"${MPIRUN:-mpirun}" "${args[@]}" "$here/verbs-run.sh"
cat "$FTCOLL_OUT"/*.jsonl >"$FTCOLL_OUT/results.jsonl"
echo "results: $FTCOLL_OUT/results.jsonl ($(wc -l <"$FTCOLL_OUT/results.jsonl") runs)"
