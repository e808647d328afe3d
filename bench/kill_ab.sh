#!/usr/bin/env bash
# A/B of ftcoll binaries on a real SIGKILL: `agree --procs --nodes N --kill K --json` per binary
# (with -t inproc or -t udp: a threads run's injected crash, `agree --transport T`),
# alternated REPS times in one run (drift and load hit every binary alike); prints per run the
# first suspicion and the first successful agreement after the kill (µs), the node processes'
# peak resident memory (kB; with -t inproc|udp the one process's, all nodes in it) and the
# failure-free agreement p50 (µs), then per N and binary the
# sorted values of each column; exits 1 if a run failed (its row says FAILED).
#   bench/kill_ab.sh [-r REPS] [-n "4 8"] [-a AGREEMENTS] [-k KILL] [-t procs|inproc|udp] BINARY...
#   e.g. bench/kill_ab.sh -r 8 /tmp/ftcoll-old target/release/ftcoll
set -euo pipefail
reps=8 nodes="4 8" agreements=2000 kill="2@1000" mode=procs
usage() { echo "usage: $0 [-r REPS] [-n NODES] [-a AGREEMENTS] [-k KILL] [-t procs|inproc|udp] BINARY..." >&2; exit 2; }
while getopts "r:n:a:k:t:" f; do
  case $f in
    r) reps=$OPTARG ;; n) nodes=$OPTARG ;; a) agreements=$OPTARG ;; k) kill=$OPTARG ;; t) mode=$OPTARG ;; *) usage ;;
  esac
done
case $mode in
  procs) how=(--procs) ;; inproc | udp) how=(--transport "$mode") ;; *) usage ;;
esac
shift $((OPTIND - 1))
(($# >= 1)) || usage
for b in "$@"; do [[ -x $b ]] || { echo "kill_ab: no ftcoll binary at $b" >&2; exit 2; }; done
command -v python3 >/dev/null || { echo "kill_ab: needs python3" >&2; exit 2; }
tmp=$(mktemp) failed=0
trap 'rm -f "$tmp"' EXIT
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); agree ${how[*]} --kill $kill, $agreements agreements"
echo "rep N binary suspicion_us first_success_us node_peak_rss_kb failure_free_p50_us"
for rep in $(seq "$reps"); do
  for n in $nodes; do
    for b in "$@"; do
      row=$("$b" agree "${how[@]}" --nodes "$n" --agreements "$agreements" --warmup $((agreements / 20)) \
        --kill "$kill" --json 2>/dev/null | python3 -c '
import json, sys
v = json.load(sys.stdin)
print(v["first_suspicion_after_kill_us"], v["first_success_after_kill_us"], v["peak_rss_kb"],
      v["classes"][0]["agreement_us"]["p50"])' 2>/dev/null) || { row="FAILED"; failed=$((failed + 1)); }
      echo "$rep $n $b $row" | tee -a "$tmp"
    done
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$tmp" <<'PY'
import collections, sys
def num(x):
    # A run may measure no value (`None` in its row: no suspicion or success after the kill).
    try:
        return float(x)
    except ValueError:
        return None
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 7:
        runs[(int(f[1]), f[2])].append([num(x) for x in f[3:]])
names = ["suspicion µs", "first success µs", "node peak RSS kB", "failure-free p50 µs"]
for (n, b), rows in sorted(runs.items()):
    cols = [sorted(r[i] for r in rows if r[i] is not None) for i in range(4)]
    gaps = [sum(r[i] is None for r in rows) for i in range(4)]
    print(f"N={n} {b}: " + " | ".join(f"{name} " + " ".join(f"{x:.0f}" for x in c) + (f" ({g} none)" if g else "")
                                     for name, c, g in zip(names, cols, gaps)))
PY
((failed == 0)) || { echo "kill_ab: $failed run(s) failed (rows FAILED above)" >&2; exit 1; }
