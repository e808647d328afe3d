#!/usr/bin/env bash
# An emulated cluster on one Linux machine (needs root and iproute2): N network namespaces
# ("hosts"), each with its own IP on a private bridge (which lives in its own namespace, so the
# machine's own network is never touched), optional `tc netem` delay/jitter on every host's
# link, and one `ftcoll bench --join` (or, with --agree, `ftcoll agree --join`) process per
# host. Rank 0 coordinates and prints the results on stdout; the other ranks' output goes to
# the log directory.
#
# usage: netns-cluster.sh [options] [-- extra ftcoll bench (or agree) flags]
#   -n, --hosts N        hosts (2..=200)                                  [4]
#   -d, --delay D        one-way netem delay per link, e.g. 10us, 2ms     [none]
#   -j, --jitter J       netem jitter (needs --delay)                     [none]
#   --emulate            emulate --delay/--jitter inside ftcoll's UDP transport
#                        (received datagrams held; the fallback, taken automatically,
#                        when the kernel has no netem qdisc)
#   -c, --crash R@S      SIGKILL host R's ftcoll S seconds after start (repeatable)
#   -x, --cut R@S        cut host R's link S seconds after start (repeatable)
#   -b, --bin PATH       the ftcoll binary                 [target/release/ftcoll]
#   -l, --logs DIR       per-rank logs; kept      [a temporary directory, removed
#                        when the run succeeds and kept (and named) when it fails]
#   -t, --timeout S      kill everything after S seconds                  [300]
#   --run CMD            instead of bench, run CMD in every host namespace with {rank},
#                        {nodes}, {ip}, {root}, {hosts} (all IPs, comma-separated) and
#                        {bin} substituted, e.g. '{bin} logp --between {hosts} --rank {rank}',
#                        and {delay} (the emulation flags when --delay is emulated, else empty)
#                        and {run_id} (this launch's id, new per invocation: --run-id)
#   --boot               bootstrap by the BMG overlay (bench --boot): each node is given
#                        only its launch-tree parent's address, not rank 0's
#   --agree              run ERA agreements (ftcoll agree --join) instead of bench; its
#                        --kill R@I makes host R SIGKILL itself (--delay needs netem here)
#   --keep               leave the namespaces up (printed) instead of cleaning up
# Everything created is removed on exit, Ctrl-C and failure (the logs of a failed run stay).
set -euo pipefail

HOSTS=4 DELAY="" JITTER="" BIN="" LOGS="" TIMEOUT=300 KEEP=0 RUN="" EMULATE=0 BOOT=0 AGREE=0
CRASH=() CUT=() EXTRA=()
die() { echo "netns-cluster: $*" >&2; exit 2; }
say() { echo "netns-cluster: $*" >&2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    -n|--hosts) HOSTS="${2:?}"; shift 2 ;;
    -d|--delay) DELAY="${2:?}"; shift 2 ;;
    -j|--jitter) JITTER="${2:?}"; shift 2 ;;
    -c|--crash) CRASH+=("${2:?}"); shift 2 ;;
    -x|--cut) CUT+=("${2:?}"); shift 2 ;;
    -b|--bin) BIN="${2:?}"; shift 2 ;;
    -l|--logs) LOGS="${2:?}"; shift 2 ;;
    -t|--timeout) TIMEOUT="${2:?}"; shift 2 ;;
    --run) RUN="${2:?}"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    --emulate) EMULATE=1; shift ;;
    --boot) BOOT=1; shift ;;
    --agree) AGREE=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

if ! [[ "$HOSTS" =~ ^[0-9]+$ ]] || ! (( HOSTS >= 2 && HOSTS <= 200 )); then die "--hosts must be 2..200, got '$HOSTS'"; fi
if ! [[ "$TIMEOUT" =~ ^[0-9]+$ ]] || ! (( TIMEOUT > 0 )); then die "--timeout must be a positive number of seconds"; fi
time_re='^[0-9]+(\.[0-9]+)?(us|ms|s)$'
[[ -z "$DELAY" || "$DELAY" =~ $time_re ]] || die "--delay must look like 10us, 2ms or 0.5ms, got '$DELAY'"
[[ -z "$JITTER" || "$JITTER" =~ $time_re ]] || die "--jitter must look like 1us or 1ms, got '$JITTER'"
[[ -z "$JITTER" || -n "$DELAY" ]] || die "--jitter needs --delay"
(( ! AGREE || ! BOOT )) || die "--agree and --boot exclude each other (agree rendezvous through rank 0)"
(( ! AGREE || ! EMULATE )) || die "--agree takes no --emulate (agree has no emulated link delay: use netem)"
for spec in "${CRASH[@]}" "${CUT[@]}"; do
  [[ "$spec" =~ ^([0-9]+)@([0-9]+(\.[0-9]+)?)$ ]] || die "crash/cut spec must be RANK@SECONDS, got '$spec'"
  (( BASH_REMATCH[1] < HOSTS )) || die "crash/cut rank ${BASH_REMATCH[1]} is not below --hosts $HOSTS"
done
(( EUID == 0 )) || die "needs root (network namespaces)"
command -v ip >/dev/null || die "needs iproute2's 'ip'"
[[ -z "$DELAY" ]] || command -v tc >/dev/null || die "--delay needs iproute2's 'tc'"
if [[ -z "$BIN" ]]; then
  BIN="$(cd "$(dirname "$0")/.." && pwd)/target/release/ftcoll"
fi
[[ -x "$BIN" ]] || die "ftcoll binary not found at $BIN (cargo build --release, or --bin PATH)"
OWN_LOGS=0
if [[ -z "$LOGS" ]]; then LOGS="$(mktemp -d /tmp/ftcoll-netns.XXXXXX)"; OWN_LOGS=1; fi
mkdir -p "$LOGS"

# Names unique to this run: several runs (and tests) may coexist.
ID=$(( $$ % 250 + 1 ))
PFX="ftc$$"
SW="${PFX}sw"
SUBNET="10.$(( 100 + $$ % 100 )).${ID}"
ns() { echo "${PFX}h$1"; }
ip_of() { echo "${SUBNET}.$(( $1 + 1 ))"; }
PIDS=()

# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done
  if (( KEEP )); then
    say "kept namespaces ${PFX}* (remove with: ip -all netns delete, or ip netns del NAME)"
  else
    for ((i = 0; i < HOSTS; i++)); do
      for p in $(ip netns pids "$(ns "$i")" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
      ip netns del "$(ns "$i")" 2>/dev/null || true
    done
    ip netns del "$SW" 2>/dev/null || true
  fi
  if (( OWN_LOGS )); then
    if (( rc == 0 && ! KEEP )); then rm -rf "$LOGS"; else say "per-rank logs kept in $LOGS"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say "creating $HOSTS hosts ${SUBNET}.1-$(( HOSTS )) on a private bridge"
ip netns add "$SW"
ip -n "$SW" link add br0 type bridge
ip -n "$SW" link set br0 up
for ((i = 0; i < HOSTS; i++)); do
  h="$(ns "$i")"
  ip netns add "$h"
  ip link add "${PFX}v$i" type veth peer name "${PFX}p$i"
  ip link set "${PFX}v$i" netns "$h"
  ip link set "${PFX}p$i" netns "$SW"
  ip -n "$h" link set "${PFX}v$i" name eth0
  ip -n "$h" addr add "$(ip_of "$i")/24" dev eth0
  ip -n "$h" link set lo up
  ip -n "$h" link set eth0 up
  ip -n "$SW" link set "${PFX}p$i" master br0
  ip -n "$SW" link set "${PFX}p$i" up
done

# A time like 10us, 2ms, 0.5s in ns.
to_ns() { awk -v t="$1" 'BEGIN { n = t + 0; u = t; sub(/^[0-9.]+/, "", u);
  m = (u == "us") ? 1e3 : (u == "ms") ? 1e6 : 1e9; printf "%d", n * m }'; }
DELAY_FLAGS=()
if [[ -n "$DELAY" ]] && (( ! EMULATE )); then
  if ! ip netns exec "$(ns 0)" tc qdisc add dev eth0 root netem delay "$DELAY" ${JITTER:+"$JITTER"} 2>/dev/null; then
    say "this kernel has no netem qdisc: emulating the delay in ftcoll's UDP transport instead"
    EMULATE=1
  else
    for ((i = 1; i < HOSTS; i++)); do
      ip netns exec "$(ns "$i")" tc qdisc add dev eth0 root netem delay "$DELAY" ${JITTER:+"$JITTER"}
    done
    say "netem: one-way delay $DELAY${JITTER:+ jitter $JITTER} on every host's link"
  fi
fi
if [[ -n "$DELAY" ]] && (( EMULATE )); then
  (( ! AGREE )) || die "--agree with --delay needs the netem qdisc, which this kernel lacks"
  DELAY_FLAGS=(--emulate-delay-ns "$(to_ns "$DELAY")")
  [[ -z "$JITTER" ]] || DELAY_FLAGS+=(--emulate-jitter-ns "$(to_ns "$JITTER")")
  say "emulated link: ${DELAY_FLAGS[*]}"
fi

# The job's secret key, shared by every host's process (packets carry a MAC under it).
if [[ -z "${FTCOLL_KEY:-}" ]]; then
  FTCOLL_KEY="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
fi
export FTCOLL_KEY
# This launch's id, shared by every host's process and new per invocation: runs without a
# rank 0 to hand out a nonce (--boot) derive their session key from it.
RUN_ID="netns-$$-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

ROOT="$(ip_of 0):47000"
TREE=""
if (( BOOT )); then TREE="$("$BIN" launch-tree --nodes "$HOSTS")"; fi
ALL=$(for ((i = 0; i < HOSTS; i++)); do printf '%s%s' "$([[ $i -gt 0 ]] && echo ,)" "$(ip_of "$i")"; done)
START=$(date +%s.%N)
if [[ -n "$RUN" ]]; then
  say "running '$RUN' on every host"
elif (( AGREE )); then
  say "starting ftcoll agree --join $ROOT on $HOSTS hosts (logs in $LOGS)"
else
  say "starting ftcoll bench --join $ROOT on $HOSTS hosts (logs in $LOGS)"
fi
for ((i = HOSTS - 1; i >= 0; i--)); do
  h="$(ns "$i")"
  if [[ -n "$RUN" ]]; then
    cmd="${RUN//\{rank\}/$i}"; cmd="${cmd//\{nodes\}/$HOSTS}"; cmd="${cmd//\{ip\}/$(ip_of "$i")}"
    cmd="${cmd//\{root\}/$(ip_of 0)}"; cmd="${cmd//\{hosts\}/$ALL}"; cmd="${cmd//\{bin\}/$BIN}"; cmd="${cmd//\{delay\}/${DELAY_FLAGS[*]}}"; cmd="${cmd//\{run_id\}/$RUN_ID}"
    read -r -a argv <<< "$cmd"
  elif (( AGREE )); then
    argv=("$BIN" agree --join "$ROOT" --rank "$i" --nodes "$HOSTS" --bind "$(ip_of "$i")" "${EXTRA[@]}")
  elif (( BOOT )); then
    parent="$(awk -v r="$i" '$1 == r { print $2 }' <<< "$TREE")"
    argv=("$BIN" bench --boot "$(ip_of "$i"):47001" --rank "$i" --nodes "$HOSTS" --run-id "$RUN_ID" "${DELAY_FLAGS[@]}" "${EXTRA[@]}")
    [[ "$parent" == - ]] || argv+=(--boot-parent "$(ip_of "$parent"):47001")
  else
    argv=("$BIN" bench --join "$ROOT" --rank "$i" --nodes "$HOSTS" --bind "$(ip_of "$i")" "${DELAY_FLAGS[@]}" "${EXTRA[@]}")
  fi
  if (( i == 0 )); then
    ( ip netns exec "$h" timeout -s KILL "$TIMEOUT" "${argv[@]}" 2>"$LOGS/rank0.err" | tee "$LOGS/rank0.out" ) &
    ROOT_PID=$!
  else
    ip netns exec "$h" timeout -s KILL "$TIMEOUT" "${argv[@]}" >"$LOGS/rank$i.out" 2>"$LOGS/rank$i.err" &
  fi
  PIDS+=($!)
done

for spec in "${CRASH[@]}"; do
  r="${spec%@*}" s="${spec#*@}"
  ( sleep "$s"; say "crash: SIGKILL of host $r's processes at ${s}s"; for p in $(ip netns pids "$(ns "$r")"); do kill -9 "$p" 2>/dev/null || true; done ) &
  PIDS+=($!)
done
for spec in "${CUT[@]}"; do
  r="${spec%@*}" s="${spec#*@}"
  ( sleep "$s"; say "cut: host $r's link down at ${s}s"; ip -n "$(ns "$r")" link set eth0 down ) &
  PIDS+=($!)
done

# Rank 0 decides the run's outcome; the others exit when it stops them.
RC=0
# (bash's notices of the crashed hosts' jobs, "Killed", are expected: silenced)
{ wait "$ROOT_PID" || RC=$?; } 2>/dev/null
END=$(date +%s.%N)
say "rank 0 finished with exit code $RC after $(echo "$END - $START" | bc 2>/dev/null || echo '?') s"
if [[ -s "$LOGS/rank0.err" ]]; then
  sed 's/^/netns-cluster: rank 0: /' "$LOGS/rank0.err" >&2
fi
exit "$RC"
