#!/usr/bin/env bash
# Fourteenth call (2026-11-27 evening): where did the inproc broadcast slow down (call13:
# 3e27567 0.39-0.47 us at N = 2, f462276 0.70-0.81)? bench/ab.sh alternates five builds three
# times: .dev/hF = 3e27567, hB = b399c32, hD = df6de0a, hE = e916b13, hH = f462276.
set -u
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/h?/*
bash bench/ab.sh -r 3 -n "2 8" -t "inproc" -i 5000 "$D/hF/ftcoll" "$D/hB/ftcoll" "$D/hD/ftcoll" "$D/hE/ftcoll" "$D/hH/ftcoll" 2>&1 | tee "$OUT/ab.txt"
bash bench/ab.sh -r 2 -n "2" -t "udp" -i 5000 "$D/hF/ftcoll" "$D/hB/ftcoll" "$D/hD/ftcoll" "$D/hE/ftcoll" "$D/hH/ftcoll" 2>&1 | tee -a "$OUT/ab.txt"
echo "load: $(cat /proc/loadavg)" | tee -a "$OUT/ab.txt"
