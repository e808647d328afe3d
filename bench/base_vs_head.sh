#!/usr/bin/env bash
# bench/base_vs_head.sh: two ftcoll binaries side by side, alternating in one run (drift and load
# hit both alike), on what a core per node should show: the kill of an agreement node (N = 8,
# node 4 killed at agreement 2500: time to the first suspicion and to the first successful
# agreement, suspicions, false ones, failure-free node p50, UDP window-full refusals and
# refused PROBEs), failure-free ERA at N = 8 (node p50 and mean, agreement p50), one simulation
# of 2^20 processes on one thread, and bench/ab.sh for N = 2, 4, 8, 16 over udp and inproc.
#
#   bench/base_vs_head.sh A B        e.g. bench/base_vs_head.sh /tmp/ftcoll-old target/release/ftcoll
#
# Needs jq. A binary older than a JSON field prints null for it. AB_REPS: repetitions of each
# bench/ab.sh pair (2).
set -u
[[ $# -eq 2 ]] || { echo "usage: $0 BINARY_A BINARY_B" >&2; exit 2; }
A=$1 B=$2
for b in "$A" "$B"; do [[ -x $b ]] || { echo "$0: $b is not an executable" >&2; exit 2; }; done
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
echo "load: $(cat /proc/loadavg)"
echo "== kill N=8 kill 4@2500 hb=100: [first_suspicion_us, first_success_us, suspicions, false, node p50, window_full, refused_probes]"
for i in 1 2 3; do
    for t in udp inproc; do for bin in "$A" "$B"; do
        echo "$(basename "$bin") $t $("$bin" agree --transport $t --nodes 8 --agreements 5000 --warmup 500 --kill 4@2500 --heartbeat-us 100 --no-model --json 2>/dev/null | jq -c '[.first_suspicion_after_kill_us, .first_success_after_kill_us, .suspicions, .false_suspicions, .classes[0].node_us.p50, .transport_counters.window_full, .transport_counters.refused_probes]')"
    done; done
    echo "$(basename "$B") udp-procs $("$B" agree --transport udp --procs --nodes 8 --agreements 5000 --warmup 500 --kill 4@2500 --heartbeat-us 100 --no-model --json 2>/dev/null | jq -c '[.first_suspicion_after_kill_us, .first_success_after_kill_us, .suspicions, .false_suspicions]')"
done
echo "== ERA failure-free N=8: [node p50, node mean, agreement p50] --agreements 20000 --warmup 2000"
for i in 1 2 3; do for t in inproc udp; do for bin in "$A" "$B"; do
    echo "$(basename "$bin") $t $("$bin" agree --transport $t --nodes 8 --agreements 20000 --warmup 2000 --kill none --heartbeat-us 100 --no-model --json 2>/dev/null | jq -c '[.classes[0].node_us.p50, .classes[0].node_us.mean, .classes[0].agreement_us.p50, .transport_counters.window_full]')"
done; done; done
echo "== sim 2^20, one thread"
for i in 1 2 3; do for bin in "$A" "$B"; do
    echo "$(basename "$bin") $("$bin" sim --nodes 1048576 --runs 1 --threads 1 --no-progress 2>&1 | tail -1)"
done; done
echo "== bench A/B"
bash "$here/ab.sh" -r "${AB_REPS:-2}" -n "2 4 8 16" -t "udp inproc" "$A" "$B"
echo "load: $(cat /proc/loadavg)"
