#!/usr/bin/env bash
# The failure detector's heartbeat where agreement nodes share cores: `ftcoll agree` with a
# fixed 100 µs period (the default before shared_heartbeat) against the default (50 µs times
# the nodes per core), alternating, for N nodes on W workers over udp and inproc. Prints, per
# run: the heartbeat period, agreement p50 measured / modeled (LogGP with processor sharing),
# datagrams sent per agreement (ERA's own: 2(N-1)), and with --kill the times from the kill to
# the first suspicion and to the first successful agreement.
#
# usage: bench/heartbeat_sharing.sh [-b FTCOLL] [-r REPS] [-c "N:W N:W ..."] [-t "udp inproc"]
#                                   [-p "100 default"] [-k "none 4@500"]
# -p: the heartbeat periods compared, µs ("default": no --heartbeat-us); -k: the --kill specs
# (a kill runs only where N > 4).
set -euo pipefail
bin=target/release/ftcoll reps=3 cells="4:1 8:1 16:1 8:2 16:2" transports="udp inproc"
periods="100 default" kills="none 4@500"
while getopts "b:r:c:t:p:k:" f; do
  case $f in
    b) bin=$OPTARG ;; r) reps=$OPTARG ;; c) cells=$OPTARG ;; t) transports=$OPTARG ;;
    p) periods=$OPTARG ;; k) kills=$OPTARG ;;
    *) echo "usage: $0 [-b FTCOLL] [-r REPS] [-c \"N:W ...\"] [-t TRANSPORTS] [-p PERIODS] [-k KILLS]" >&2; exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "heartbeat_sharing: no ftcoll binary at $bin (cargo build --release)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "heartbeat_sharing: needs python3 to print the table" >&2; exit 2; }
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
row() {
  python3 -c '
import json, sys
d = json.load(sys.stdin)
a = d["prediction"]["agreement"] if d.get("prediction") else None
n = d["agreements"]  # warm-up included, as the counters are
cells = [sys.argv[1], d["heartbeat_us"]]
cells += [round(a["measured_p50_us"], 1), round(a["predicted_p50_us"], 1), round(a["ratio_p50"], 2)] if a else ["-"] * 3
cells += [round(d["transport_counters"]["sent"] / max(n, 1), 1)]
cells += [d.get("first_suspicion_after_kill_us"), d.get("first_success_after_kill_us")]
print(" ".join(str(c) for c in cells))' "$1"
}
echo "rep transport N W kill | heartbeat_us p50_us model_p50_us ratio datagrams/agreement first_suspicion_us first_success_us"
for ((rep = 1; rep <= reps; rep++)); do
  for t in $transports; do
    for c in $cells; do
      n=${c%%:*} w=${c##*:}
      for hb in $periods; do
        flags=()
        [[ $hb == default ]] || flags=(--heartbeat-us "$hb")
        for kill in $kills; do
          ((n > 4)) || [[ $kill == none ]] || continue
          "$bin" agree --nodes "$n" --workers "$w" --transport "$t" --agreements 1000 --warmup 100 \
            --kill "$kill" "${flags[@]}" --json 2>/dev/null |
            row "$rep $t $n $w $kill |"
        done
      done
    done
  done
done
