#!/usr/bin/env bash
# Eleventh call (2026-11-27): a user's plain `bench --nodes N --kill none` (no --params) on a
# core per node, old = 2c5a735 (fixed-cost prediction from the ping-pong's medians) against
# new = b399c32 (noisy LogP from the same ping-pong), alternating.
set -u
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib
chmod +x "$D"/bin/* "$D"/ab/old "$D"/ab/new
echo "load: $(cat /proc/loadavg); cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)" | tee "$OUT/ab.txt"
echo '[bin, N, transport, noisy, p50_us, p99_us, ratio_p50, ratio_p99, ratio_p99.9]' | tee -a "$OUT/ab.txt"
for rep in 1 2; do
  for n in 2 4 8 16; do
    for t in udp inproc; do
      for b in old new; do
        timeout 60 "$D/ab/$b" bench --nodes "$n" --transport "$t" --kill none --iterations 5000 --warmup 500 --json 2>/dev/null \
          | jq -c --arg b "$b" --arg n "$n" --arg t "$t" '[$b, $n, $t, .config.noisy_model, .coloring_latency_us.p50, .coloring_latency_us.p99, (.prediction.coloring.ratio.p50*100|round/100), (.prediction.coloring.ratio.p99*100|round/100), (.prediction.coloring.ratio["p99.9"]*100|round/100)]' \
          | tee -a "$OUT/ab.txt"
      done
    done
  done
done
echo "load: $(cat /proc/loadavg)" | tee -a "$OUT/ab.txt"
