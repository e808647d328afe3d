#!/usr/bin/env bash
# Nineteenth call (2026-11-27 evening): where the checked correction's time goes on a core per
# node. .dev/hT = 21160ca built with `--features trace`; bench/trace_vs_model.sh for inproc
# N = 16 and 8 with the checked correction and N = 16 without, 1000 operations after 100, the
# traces (measured and the model's) and the tables under /tmp/o, tarred into $OUT.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/h?/*
trap 'tar czf "$OUT/all.tgz" -C /tmp o' EXIT
"$D/hT/ftcoll" logp --transport inproc --save "$O/inproc.json" > /dev/null
run() { # NAME NODES ALGO
  timeout 120 bash bench/trace_vs_model.sh -b "$D/hT/ftcoll" -o "$O/$1" -a "$3" -- --nodes "$2" --transport inproc \
    --iterations 1000 --warmup 100 --params "$O/inproc.json" > "$O/$1.txt" 2>&1
  echo "$1 exit $?"
}
run n16d 16 ""
run n16n 16 "--correction none"
run n8d 8 ""
for f in n16d n16n n8d; do echo "== $f"; head -60 "$O/$f.txt"; done
