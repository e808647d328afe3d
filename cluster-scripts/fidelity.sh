#!/usr/bin/env bash
# Model fidelity on the emulated cluster: measures L and o between two hosts with
# `ftcoll logp --between` (link delay D), then runs `ftcoll bench --join` on N hosts for
# corrected binomial, Lamé and optimal trees and corrected gossip, without and with a host
# crashed mid-run, each with the model fed the measured L and o, and prints one markdown table
# of p50 coloring latency, measured against predicted. Needs root (netns-cluster.sh).
# The emulated hosts share this machine's cores: when they outnumber them, each busy-polling
# host runs cores/hosts of the time and the runs are given `--shared-cores` (the model and the
# protocols take o·hosts/cores, processor sharing; see docs/measurements.md "Model fidelity with a real L").
#
# usage: fidelity.sh [-n HOSTS] [-d DELAY] [--iterations N] [--poll busy|yield|blocking]
#   -n, --hosts N      hosts of the broadcast runs                                   [4]
#   -d, --delay D      one-way link delay (netem, or emulated when the kernel lacks it) [50us]
#   --iterations N     measured operations per run (plus a tenth as warm-up)         [2000]
#   --poll P           how nodes wait: busy needs a core per host; yield (spin, giving the
#                      core away after every empty pass) or blocking (sleep in the kernel)
#                      share cores                                     [yield if N > cores]
#   --cores C          cores the hosts share, for the model; 0: a core per host (plain LogP)
#                                                                            [nproc]
set -euo pipefail

die() { echo "fidelity: $*" >&2; exit 2; }
HOSTS=4 DELAY=50us ITER=2000 POLL="" CORES="$(nproc)"
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n|--hosts) HOSTS="${2:?}"; shift 2 ;;
    -d|--delay) DELAY="${2:?}"; shift 2 ;;
    --iterations) ITER="${2:?}"; shift 2 ;;
    --poll) POLL="${2:?}"; shift 2 ;;
    --cores) CORES="${2:?}"; shift 2 ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done
if ! [[ "$ITER" =~ ^[0-9]+$ ]] || ! (( ITER >= 100 )); then die "--iterations must be at least 100"; fi
if ! [[ "$CORES" =~ ^[0-9]+$ ]]; then die "--cores must be a number of cores (0: a core per host)"; fi
if ! [[ "$HOSTS" =~ ^[0-9]+$ ]] || ! (( HOSTS >= 3 )); then die "--hosts must be at least 3 (one is crashed)"; fi
[[ -n "$POLL" ]] || { if (( HOSTS + 1 > $(nproc) )); then POLL=yield; else POLL=busy; fi; }
[[ "$POLL" == busy || "$POLL" == yield || "$POLL" == blocking ]] || die "--poll must be busy, yield or blocking"
# L between two hosts: measured as the broadcast nodes wait (yield spins: two hosts fit two cores).
LOGP_POLL=busy
[[ "$POLL" == blocking ]] && LOGP_POLL=blocking
command -v python3 >/dev/null || die "needs python3 (to read the JSON results)"
HERE="$(cd "$(dirname "$0")" && pwd)"
NETNS="$HERE/netns-cluster.sh"
D_NS="$(awk -v t="$DELAY" 'BEGIN { n = t + 0; u = t; sub(/^[0-9.]+/, "", u);
  m = (u == "us") ? 1e3 : (u == "ms") ? 1e6 : 1e9; printf "%d", n * m }')"

echo "fidelity: measuring L and o between two hosts (delay $DELAY, poll $POLL)" >&2
# No emulated delay: no L to expect (logp refuses an expected L of 0).
EXPECT=""
[ "$D_NS" -gt 0 ] && EXPECT="--expected-L-ns $D_NS"
LOGP="$("$NETNS" -n 2 -d "$DELAY" --run "{bin} logp --between {hosts} --rank {rank} --auth off --reps 2000 --json --poll $LOGP_POLL $EXPECT {delay}" 2>/dev/null | grep '^{')"
read -r L_NS O_NS RATIO < <(python3 -c '
import json, sys
v = json.loads(sys.argv[1]); d = v["direct"]
r = (v.get("L_over_expected") or {}).get("direct")
print(d["l_ns"], d["o_ns"], "n/a" if r is None else "%.2f" % r)' "$LOGP")
MODEL_O=$O_NS SHARED=()
if (( CORES > 0 )); then
  SHARED=(--shared-cores "$CORES")
  (( HOSTS > CORES )) && MODEL_O=$(( (O_NS * HOSTS + CORES - 1) / CORES ))
  SHARE="$HOSTS hosts on $CORES cores"
else
  SHARE="a core per host"
fi
echo "| link delay D | measured L (direct) | L / D | o | model o ($SHARE) |"
echo "|---|---|---|---|---|"
echo "| $DELAY | $(( L_NS / 1000 )).$(( L_NS % 1000 / 100 )) µs | $RATIO | $O_NS ns | $MODEL_O ns |"
echo
echo "| algorithm | crash | measured p50 µs | model p50 µs | ratio | violations |"
echo "|---|---|---|---|---|---|"
WARM=$(( ITER / 10 ))
MID=$(( WARM + ITER / 2 ))
for algo in "corrected-tree --tree binomial --correction checked" \
            "corrected-tree --tree lame:2 --correction checked" \
            "corrected-tree --tree optimal --correction checked" \
            "corrected-gossip"; do
  for kill in none "2@$MID:sigkill"; do
    read -r -a A <<< "--algo $algo"
    OUT="$("$NETNS" -n "$HOSTS" -d "$DELAY" -- "${A[@]}" --iterations "$ITER" --warmup "$WARM" --poll "$POLL" \
      --kill "$kill" --L-ns "$L_NS" --o-ns "$O_NS" "${SHARED[@]}" --json 2>/dev/null | grep '^{' || true)"
    if [[ -z "$OUT" ]]; then
      echo "| $algo | $kill | run failed | | | |"
      continue
    fi
    python3 -c '
import json, sys
v = json.loads(sys.argv[1]); c = v["prediction"]["coloring"]
print("| %s | %s | %.1f | %.1f | %.2f | %d |" % (sys.argv[2], sys.argv[3], c["measured_us"]["p50"],
      c["predicted_us"]["p50"], c["ratio"]["p50"], v["violations"]))' "$OUT" "$algo" "$kill"
  done
done
