#!/bin/bash
# A/B of ftcoll binaries: each binary's `bench --kill none --json` per node count and transport,
# alternated REPS times in one run (so that drift and load hit every binary alike); prints per
# run the coloring p50 and p99 (µs), measured/modeled p50, standalone ACKs per data datagram,
# messages and retransmissions per operation, the load, measured/modeled p99, whether the
# prediction was noisy LogP, and the quiescence p50 (µs) with its measured/modeled ratio.
#   bench/ab.sh [-r REPS] [-n "8 16"] [-t "udp inproc"] [-i ITERATIONS] BINARY...
#   e.g. bench/ab.sh -r 3 -n "8 16" -t udp /tmp/ftcoll-old target/release/ftcoll
set -eu
reps=3 nodes="2" transports="inproc udp" iters=5000
while getopts "r:n:t:i:" f; do
  case $f in
    r) reps=$OPTARG ;; n) nodes=$OPTARG ;; t) transports=$OPTARG ;; i) iters=$OPTARG ;;
    *) echo "usage: $0 [-r REPS] [-n NODES] [-t TRANSPORTS] [-i ITERATIONS] BINARY..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 1 ] || { echo "usage: $0 [-r REPS] [-n NODES] [-t TRANSPORTS] [-i ITERATIONS] BINARY..." >&2; exit 2; }
for b in "$@"; do # A `stages` build measures its clock reads too (`cargo bench --features stages` makes one).
  ! "$b" --version 2>/dev/null | grep -q '+stages' || echo "ab: note: $b is a build with the stages feature" >&2
done
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "rep N transport binary coloring_p50_us coloring_p99_us ratio_p50 acks_per_data msgs_per_op rtx_per_op load ratio_p99 noisy quiescence_p50_us quiescence_ratio_p50"
for rep in $(seq "$reps"); do
  for n in $nodes; do
    for t in $transports; do
      for b in "$@"; do
        out=$("$b" bench --nodes "$n" --kill none --transport "$t" --iterations "$iters" \
          --warmup $((iters / 10)) --json 2>/dev/null) || { echo "$rep $n $t $b FAILED"; continue; }
        echo "$rep $n $t $b $(echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin); p = d["prediction"]; a = d.get("acks_per_data")
ops = max(d["measured_ops"], 1)
print("%.3f %.3f %.3f %s %.1f %.2f" % (d["coloring_latency_us"]["p50"], d["coloring_latency_us"]["p99"],
      p["coloring"]["ratio"]["p50"], "%.3f" % a if a is not None else "-", d["messages_per_op"],
      d["transport"]["retransmits"] / ops))') $(cut -d' ' -f1 /proc/loadavg) $(echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin)
p = d["prediction"]
print("%.3f %s %.3f %.3f" % (p["coloring"]["ratio"]["p99"], d["config"].get("noisy_model"),
      d["quiescence_latency_us"]["p50"], p["quiescence"]["ratio"]["p50"]))')"
      done
    done
  done
done
