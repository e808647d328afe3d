#!/usr/bin/env bash
# Broadcasts under injected loss, measured / modeled: `ftcoll bench --transport udp --kill none
# --loss P` for N × P × {checked correction (default), --correction none}; one row per run with
# the measured and predicted coloring and quiescence latency (p50, p99, p99.9, µs), the
# retransmissions, how many of them a timer sent, and the timer's mean wait (the timeout the
# model charges per lost copy). Each run estimates its own LogP parameters (the noisy model
# draws o_s, o_r and L from its ping-pong); see docs/usage.md, `--loss`.
#
# usage: bench/loss.sh [-b FTCOLL] [-i ITERATIONS] [-n "4 8"] [-l "0 0.05 0.15"] [-c "default none"]
set -euo pipefail
bin=target/release/ftcoll iters=3000 nodes="4 8" losses="0 0.05 0.15" corrections="default none"
while getopts "b:i:n:l:c:" f; do
  case $f in
    b) bin=$OPTARG ;; i) iters=$OPTARG ;; n) nodes=$OPTARG ;; l) losses=$OPTARG ;; c) corrections=$OPTARG ;;
    *) echo "usage: $0 [-b FTCOLL] [-i ITERATIONS] [-n NODES] [-l LOSSES] [-c CORRECTIONS]" >&2; exit 2 ;;
  esac
done
[[ -x $bin ]] || { echo "loss: no ftcoll binary at $bin (cargo build --release)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "loss: needs python3 to print the table" >&2; exit 2; }
echo "$("$bin" --version); cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); $iters iterations per run"
printf '%3s %5s %8s | %-32s | %-32s | %6s %6s %8s\n' N loss corr "coloring p50 / p99 / p99.9 meas:model" \
  "quiescence p50 / p99 / p99.9" retx timer "wait us"
for n in $nodes; do
  for l in $losses; do
    for c in $corrections; do
      extra=()
      [[ $c == none ]] && extra+=(--correction none)
      # Captured first: a python3 starting beside the run would take a core from it.
      out=$("$bin" bench --nodes "$n" --kill none --loss "$l" --iterations "$iters" "${extra[@]}" --json 2>/dev/null)
      printf '%s' "$out" | N=$n L=$l C=$c python3 -c '
import json, os, sys
d = json.load(sys.stdin)
p = d["prediction"]
def cell(k):
    m, e = p[k]["measured_us"], p[k]["predicted_us"]
    return " ".join("{:.0f}:{:.0f}".format(m[q], e[q]) for q in ("p50", "p99", "p99.9"))
t = d["transport"]
k = t.get("timeouts", 0)
wait = t.get("timeout_wait_ns", 0) / k / 1000 if k else 0
print("{:>3} {:>5} {:>8} | {:<32} | {:<32} | {:>6} {:>6} {:>8.0f}".format(
    os.environ["N"], os.environ["L"], os.environ["C"], cell("coloring"), cell("quiescence"),
    t["retransmits"], k, wait))'
    done
  done
done
