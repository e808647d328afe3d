#!/usr/bin/env bash
# Twentieth call (2026-11-27 evening): is the checked correction's extra time on a core per node
# the previous operation's late correction messages, still being received when the next
# broadcast starts? .dev/hG = 21160ca + an uncommitted experiment: FTX_GAP_NS holds the next
# start that long after a retirement. gap 0 against 5000 ns, inproc, N = 8 and 16, checked
# correction and none, one saved calibration, alternating three times.
set -u
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib
chmod +x "$D"/bin/* "$D"/h?/*
"$D/hG/ftcoll" logp --transport inproc --save /tmp/inproc.json > /dev/null
echo "load: $(cat /proc/loadavg); [gap_ns, N, correction, coloring p50, p99, model p50, msgs/op, quiescence p50]" | tee "$OUT/gap.txt"
for rep in 1 2 3; do
  for n in 8 16; do
    for c in checked none; do
      for gap in 0 5000; do
        FTX_GAP_NS=$gap timeout 60 "$D/hG/ftcoll" bench --nodes "$n" --transport inproc --kill none --iterations 5000 \
          --warmup 500 --params /tmp/inproc.json --correction "$c" --json 2>/dev/null \
          | jq -c --arg g "$gap" --arg c "$c" --arg n "$n" '[$g, $n, $c, .coloring_latency_us.p50, .coloring_latency_us.p99, .prediction.coloring.predicted_us.p50, .messages_per_op, .quiescence_latency_us.p50]' | tee -a "$OUT/gap.txt"
      done
    done
  done
done
echo "load: $(cat /proc/loadavg)" | tee -a "$OUT/gap.txt"
