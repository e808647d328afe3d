#!/usr/bin/env bash
# bench/benches_ab.sh: two builds of ftcoll side by side on the cargo benches a refactor must not
# slow down (sim_throughput, transport_latency and era_cost, each with --quick) and on a default
# `ftcoll bench --json`, alternating ROUNDS times in one run (drift and load hit both alike).
# Each build is a checkout and the target directory it was built into with
#   cargo build --release --benches --bins
# (the bench binaries run in their checkout, as `cargo bench` runs them). Odd rounds run A
# first, even rounds B. Prints one line per round, build and measure; exits 1 if a run failed
# or printed none of the lines looked for.
#
#   bench/benches_ab.sh [-r ROUNDS] A_CHECKOUT A_TARGET B_CHECKOUT B_TARGET
#   e.g. bench/benches_ab.sh -r 4 /tmp/wt-old /tmp/tgt-old . target
set -uo pipefail
rounds=4
while getopts "r:" f; do
    case $f in r) rounds=$OPTARG ;; *) exit 2 ;; esac
done
shift $((OPTIND - 1))
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "benches_ab: -r takes a positive number of rounds" >&2; exit 2; }
[[ $# -eq 4 ]] || { echo "usage: $0 [-r ROUNDS] A_CHECKOUT A_TARGET B_CHECKOUT B_TARGET" >&2; exit 2; }
command -v python3 >/dev/null || { echo "benches_ab: needs python3" >&2; exit 2; }
declare -A src tgt
src[A]=$(cd "$1" && pwd) tgt[A]=$(cd "$2" && pwd) src[B]=$(cd "$3" && pwd) tgt[B]=$(cd "$4" && pwd)
# The newest build of a bench target in a target directory.
bench_bin() { ls -t "$1"/release/deps/"$2"-* 2>/dev/null | grep -v '\.d$' | head -1; }
for b in A B; do
    for x in sim_throughput transport_latency era_cost; do
        [[ -x $(bench_bin "${tgt[$b]}" $x) ]] || { echo "benches_ab: no $x bench in ${tgt[$b]}" >&2; exit 2; }
    done
    [[ -x ${tgt[$b]}/release/ftcoll ]] || { echo "benches_ab: no ftcoll in ${tgt[$b]}" >&2; exit 2; }
    echo "$b = ${src[$b]} ($(git -C "${src[$b]}" log -1 --format=%h 2>/dev/null || echo '?'))"
done
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
# Prints what a bench's filter kept ($1: the bench's name, $2: its lines); none is a failure.
show() {
    [[ -n $2 ]] || { echo "benches_ab: no figures from $1" >&2; return 1; }
    echo "$2"
}
for i in $(seq "$rounds"); do
    order="A B"
    ((i % 2 == 0)) && order="B A"
    for b in $order; do
        cd "${src[$b]}" || exit 2
        # sim_throughput: one-thread rows (P, events/s, wall s).
        show sim_throughput "$("$(bench_bin "${tgt[$b]}" sim_throughput)" --quick 2>&1 |
            awk -v p="$i $b sim" '$2 == 1 && $1 ~ /^[0-9]+$/ {print p, "P=" $1, "events/s=" $5, "wall_s=" $7}')" || failed=1
        # transport_latency: one-way medians and message rates.
        show transport_latency "$("$(bench_bin "${tgt[$b]}" transport_latency)" --quick 2>&1 |
            awk -v p="$i $b latency" '/raw UDP|ftcoll (udp|inproc)/ {printf "%s", p; for (k = 1; k <= NF; k++) printf " %s", $k; print ""}')" || failed=1
        # era_cost: ns per failure-free agreement with the wire codec (the column's name
        # differs between builds: the old table has one ns column).
        show era_cost "$("$(bench_bin "${tgt[$b]}" era_cost)" --quick 2>&1 | awk -v p="$i $b era_cost" '
            /\+codec/ {codec = 1} /^ +[0-9]+ / {print p, "nodes=" $1, "ns/agreement=" (codec ? $4 : $2)}')" || failed=1
        # The default bench: coloring latency and its model.
        out=$("${tgt[$b]}/release/ftcoll" bench --json 2>/dev/null) || { echo "$i $b bench FAILED"; failed=1; continue; }
        python3 -c '
import json, sys
d = json.loads(sys.argv[2]); c = d["coloring_latency_us"]
r = ((d.get("prediction") or {}).get("coloring") or {}).get("ratio") or {}
print(sys.argv[1], "bench coloring_p50_us=%.1f p99_us=%.1f ops/s=%d msgs/op=%.1f measured/modeled_p50=%s" % (
    c["p50"], c["p99"], d["ops_per_second"], d["messages_per_op"], "%.2f" % r["p50"] if "p50" in r else "-"))
' "$i $b" "$out" || failed=1
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $failed
