#!/usr/bin/env bash
# bench/agree_model_ab.sh: `agree`'s measured against modeled latency for several ftcoll
# binaries, alternating REPS times in one run, each rep starting with the next binary (drift
# and load hit every binary alike): per run,
# per agreement and per node, measured / modeled p50 and p99 (µs) and their ratio (and over
# UDP the standalone ACK datagrams per data datagram), for 8 in-process nodes (20 000
# agreements), 4 UDP nodes (2000) and the default run; exits 1 if a run failed (its row says
# FAILED).
#   bench/agree_model_ab.sh [-r REPS] BINARY...
#   e.g. bench/agree_model_ab.sh -r 3 /tmp/ftcoll-old target/release/ftcoll
set -uo pipefail
reps=3
if [[ ${1:-} == -r ]]; then
    reps=${2:-}
    shift 2 || shift
fi
[[ $reps =~ ^[1-9][0-9]*$ ]] || { echo "agree_model_ab: -r takes a positive number" >&2; exit 2; }
(($# >= 1)) || { echo "usage: $0 [-r REPS] BINARY..." >&2; exit 2; }
for b in "$@"; do [[ -x $b ]] || { echo "agree_model_ab: no ftcoll binary at $b" >&2; exit 2; }; done
command -v python3 >/dev/null || { echo "agree_model_ab: needs python3" >&2; exit 2; }
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
bins=("$@")
for i in $(seq "$reps"); do
    # Each rep starts with the next binary, so none always runs first.
    k=$(((i - 1) % ${#bins[@]}))
    for b in "${bins[@]:k}" "${bins[@]:0:k}"; do
        for args in "--nodes 8 --transport inproc --agreements 20000" "--nodes 4 --transport udp --agreements 2000" ""; do
            # shellcheck disable=SC2086 # the arguments split on purpose
            out=$("$b" agree $args --json 2>/dev/null) || { echo "$i $b [${args:-default}] FAILED"; failed=1; continue; }
            python3 -c '
import json, sys
d = json.loads(sys.argv[2]); p = d["prediction"]; a = p["agreement"]; n = p["node"]
f = lambda c, q: "%.2f/%.2f (%.2f)" % (c["measured_" + q + "_us"], c["predicted_" + q + "_us"], c["ratio_" + q])
q = d.get("acks_per_data")
print(sys.argv[1], "agreement p50", f(a, "p50"), "p99", f(a, "p99"), "| node p50", f(n, "p50"), "p99", f(n, "p99"), "noisy=%s" % p.get("noisy"), "" if q is None else "acks/data=%.3f" % q)
' "$i $b [${args:-default}]" "$out" 2>/dev/null || { echo "$i $b [${args:-default}] FAILED (no prediction)"; failed=1; }
        done
    done
done
exit $failed
