#!/usr/bin/env bash
# Second call: B's heartbeat period against kill -> first success (N=8), the failure-free cost
# of each period, and how long a SIGKILLed process's UDP port stays open against its RSS.
set -u
O=/tmp/o; mkdir -p "$O"
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/hB/ftcoll
{
  echo "load: $(cat /proc/loadavg); cores: $(nproc)"
  echo "== kill 4@2500, N=8: [first_suspicion_us, first_success_us, suspicions, false, failure-free node p50]"
  for rep in 1 2 3; do
    for hb in 100 50 25; do
      for t in udp inproc procs; do
        args=(--transport "$t")
        [[ $t == procs ]] && args=(--transport udp --procs)
        r=$(timeout 60 "$D/hB/ftcoll" agree --nodes 8 "${args[@]}" --agreements 5000 --warmup 500 --kill 4@2500 --heartbeat-us "$hb" --no-model --json 2>/dev/null |
          jq -c '[.first_suspicion_after_kill_us, .first_success_after_kill_us, .suspicions, .false_suspicions, (.classes[] | select(.class == "failure-free") | .node_us.p50)]')
        echo "$rep hb=$hb $t $r"
      done
    done
  done
  echo "== failure-free N=8, 20000 agreements: [node p50, node mean, agreement p50, heartbeats]"
  for rep in 1 2 3; do
    for hb in 100 50 25; do
      for t in udp inproc; do
        r=$(timeout 60 "$D/hB/ftcoll" agree --nodes 8 --transport "$t" --agreements 20000 --warmup 1000 --kill none --heartbeat-us "$hb" --no-model --json 2>/dev/null |
          jq -c '[(.classes[0].node_us.p50), (.classes[0].node_us.mean), (.classes[0].agreement_us.p50), .transport_counters.heartbeats]')
        echo "$rep hb=$hb $t $r"
      done
    done
  done
  echo "== SIGKILL -> the killed process's UDP port refuses (python3 .dev/killtime.py)"
  timeout 120 python3 "$D/killtime.py"
  echo "load: $(cat /proc/loadavg)"
} 2>&1 | tee "$O/hb.txt"
