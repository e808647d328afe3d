#!/usr/bin/env bash
# bench/fidelity_ab.sh: the fidelity table (`bench/fidelity_cores.sh -e`: each run estimates
# its own LogP parameters and distributions) for several ftcoll binaries, alternating ROUNDS
# times in one run, each round starting with the next binary; then, per binary, how many rows
# had p50 within [0.8, 1.25] and p99 within [0.67, 1.5], how many p99 were over-predicted
# (ratio below 0.67) or under-predicted (above 1.5), and each row's p99 ratios in run order.
#   bench/fidelity_ab.sh [-r ROUNDS] [-n "2 4 8"] BINARY...
#   e.g. bench/fidelity_ab.sh -r 6 /tmp/ftcoll-old target/release/ftcoll
set -uo pipefail
rounds=3 nodes="2 4 8"
while getopts "r:n:" f; do
    case $f in
        r) rounds=$OPTARG ;; n) nodes=$OPTARG ;;
        *) echo "usage: $0 [-r ROUNDS] [-n NODES] BINARY..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "fidelity_ab: -r takes a positive number" >&2; exit 2; }
(($# >= 1)) || { echo "usage: $0 [-r ROUNDS] [-n NODES] BINARY..." >&2; exit 2; }
for b in "$@"; do [[ -x $b ]] || { echo "fidelity_ab: no ftcoll binary at $b" >&2; exit 2; }; done
command -v python3 >/dev/null || { echo "fidelity_ab: needs python3" >&2; exit 2; }
here=$(dirname "$0")
log=$(mktemp)
trap 'rm -f "$log"' EXIT
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
bins=("$@")
failed=0
for i in $(seq "$rounds"); do
    k=$(((i - 1) % ${#bins[@]}))
    for b in "${bins[@]:k}" "${bins[@]:0:k}"; do
        echo "== round $i: $b" | tee -a "$log"
        bash "$here/fidelity_cores.sh" -b "$b" -n "$nodes" -e 2>&1 | tee -a "$log" | grep -E '^\| [0-9]|^within' || failed=1
    done
done
python3 - "$log" <<'PY'
import re, sys, collections
rows = collections.defaultdict(list)
cur = None
for line in open(sys.argv[1]):
    m = re.match(r'== round \d+: (.+)$', line)
    if m:
        cur = m.group(1)
        continue
    c = [x.strip() for x in line.split('|')]
    if len(c) > 8 and c[1].isdigit():
        ratio = lambda s: float(re.search(r'\(([^()]+)\)\s*$', s).group(1))
        rows[cur].append(((c[1], c[2], c[3]), ratio(c[6]), ratio(c[7])))
print()
for b, v in rows.items():
    p50 = sum(0.8 <= r[1] <= 1.25 for r in v)
    p99 = sum(0.67 <= r[2] <= 1.5 for r in v)
    print(f"{b}: {len(v)} rows; p50 in band {p50}, p99 in band {p99}; p99 below 0.67 "
          f"{sum(r[2] < 0.67 for r in v)}, above 1.5 {sum(r[2] > 1.5 for r in v)}; "
          f"p99 ratio {min(r[2] for r in v):.2f}-{max(r[2] for r in v):.2f}")
    for key in dict.fromkeys(r[0] for r in v):
        print("   N=%s %s %s:" % key, " ".join("%.2f" % r[2] for r in v if r[0] == key))
PY
exit $failed
