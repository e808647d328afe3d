#!/bin/bash
# A/B of ftcoll binaries at N = 2: each binary's `bench --nodes 2 --kill none --json` per
# transport, alternated REPS times in one run; prints the coloring p50 (µs), the model's
# p50, measured/modeled p50 and osu_bcast's measured/modeled avg, and the load.
#   bench/ab_n2.sh [-r REPS] BINARY...     e.g. bench/ab_n2.sh -r 3 /tmp/ftcoll-old target/release/ftcoll
set -eu
reps=3
if [ "${1:-}" = "-r" ]; then reps=$2; shift 2; fi
[ $# -ge 1 ] || { echo "usage: $0 [-r REPS] BINARY..." >&2; exit 2; }
echo "rep transport binary coloring_p50_us model_p50_us ratio_p50 osu_avg_ratio load"
for rep in $(seq "$reps"); do
  for t in inproc udp; do
    for b in "$@"; do
      out=$("$b" bench --nodes 2 --kill none --transport "$t" --json 2>/dev/null)
      echo "$rep $t $b $(echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin); p = d["prediction"]; o = p.get("osu_bcast")
print("%.3f %.3f %.3f %s" % (d["coloring_latency_us"]["p50"], p["coloring"]["predicted_us"]["p50"],
      p["coloring"]["ratio"]["p50"], "%.3f" % o["ratio"]["avg"] if o else "-"))') $(cut -d' ' -f1 /proc/loadavg)"
    done
  done
done
