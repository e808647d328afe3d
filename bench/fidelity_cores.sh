#!/usr/bin/env bash
# Measured / modeled on this machine's cores: `ftcoll bench --kill none` for N = 2, 4, 8, 16 ×
# {udp, inproc} × {checked correction (default), --correction none}; prints one row per run with
# the LogP estimate, measured and predicted coloring latency (p50, p99) and their ratio, and
# messages per operation measured / modeled. Meaningful with one core per node (N + 1 cores:
# the coordinator's thread too); with fewer, the table says how many cores there were.
#
# usage: bench/fidelity_cores.sh [-b FTCOLL] [-i ITERATIONS] [-n "2 4 8 16"] [-o OUT.jsonl]
set -euo pipefail
bin=target/release/ftcoll iters=5000 nodes="2 4 8 16" out=""
while getopts "b:i:n:o:" f; do
  case $f in
    b) bin=$OPTARG ;; i) iters=$OPTARG ;; n) nodes=$OPTARG ;; o) out=$OPTARG ;;
    *) echo "usage: $0 [-b FTCOLL] [-i ITERATIONS] [-n NODES] [-o OUT.jsonl]" >&2; exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "fidelity_cores: no ftcoll binary at $bin (cargo build --release)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "fidelity_cores: needs python3 to print the table" >&2; exit 2; }
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); $iters iterations per run" >&2
for n in $nodes; do
  for t in udp inproc; do
    for c in default none; do
      extra=()
      [[ $c == none ]] && extra=(--correction none)
      "$bin" bench --nodes "$n" --transport "$t" --kill none --iterations "$iters" \
        --warmup $((iters / 10)) --json "${extra[@]}" | python3 -c '
import json, sys
v = json.load(sys.stdin)
v["run"] = {"correction": sys.argv[1]}
print(json.dumps(v))' "$c" >>"$tmp"
    done
  done
done
[[ -n $out ]] && cp "$tmp" "$out"
python3 - "$tmp" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print("| N | transport | correction | o_s / o_r / L ns | coloring p50 µs meas / model (ratio) | p99 meas / model (ratio) | msgs/op meas / model |")
print("|---|---|---|---|---|---|---|")
for v in rows:
    c, e, p = v["config"], v.get("logp_estimate") or {}, v["prediction"]
    col = p["coloring"]
    print("| {} | {} | {} | {} / {} / {} | {:.2f} / {:.2f} ({:.2f}) | {:.2f} / {:.2f} ({:.2f}) | {:.1f} / {:.1f} |".format(
        c["nodes"], c["transport"], v["run"]["correction"], e.get("o_send_ns"), e.get("o_recv_ns"), c["L_ns"],
        col["measured_us"]["p50"], col["predicted_us"]["p50"], col["ratio"]["p50"],
        col["measured_us"]["p99"], col["predicted_us"]["p99"], col["ratio"]["p99"],
        v["messages_per_op"], p["messages_per_op"]))
PY
