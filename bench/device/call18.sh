#!/usr/bin/env bash
# Eighteenth call (2026-11-27 evening): does the start stamped after the start signal (21160ca,
# .dev/hC) predict worse than f462276 (.dev/hH) with the checked correction at N = 8 and 16
# (call17: inproc measured/modeled p50 1.42 and 1.39)? bench/fidelity_cores.sh for each build,
# inproc only, alternating twice on one instance (each calibrates afresh).
set -u
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/h?/*
for rep in 1 2; do
  for b in hH hC; do
    echo "== $rep $b $("$D/$b/ftcoll" --version)"
    timeout 100 bash bench/fidelity_cores.sh -b "$D/$b/ftcoll" -i 5000 -n "2 4 8 16" -t inproc 2>&1 | grep -v '^|---'
  done
done 2>&1 | tee "$OUT/fid_ab.txt"
echo "load: $(cat /proc/loadavg)"
