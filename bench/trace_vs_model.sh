#!/usr/bin/env bash
# A measured run's messages beside the model's, one command: runs `ftcoll bench --kill none
# --trace` (a binary built with `cargo build --release --features trace`), reads the model
# parameters the run used from its JSON (o_s, o_r, L; with more nodes than workers, the shared
# cores, the visit cost, the costs within one core and per ring polled), runs the model's
# operation with the same parameters and algorithm
# (`ftcoll sim --runs 1 --faults 0 --trace`, fixed costs, times in ns), and prints
# `bench/trace_summary.py`'s table: every event's time from the operation's start over the
# measured operations (p10, p50, p90) with the model's beside it.
#
# usage: bench/trace_vs_model.sh [-b FTCOLL] [-o DIR] [-a "ALGO FLAGS"] [-- BENCH FLAGS]
#   -a: the algorithm's flags, given to both bench and sim (e.g. "--correction none --tree kary:4")
#   after --: bench's own flags (e.g. --nodes 8 --transport udp --iterations 3000 --params udp.json)
#   -o: keep measured.csv, model.csv and bench.json there (default: a temporary directory)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=target/release/ftcoll out="" algo=""
while getopts "b:o:a:" f; do
  case $f in
    b) bin=$OPTARG ;; o) out=$OPTARG ;; a) algo=$OPTARG ;;
    *) echo "usage: $0 [-b FTCOLL] [-o DIR] [-a \"ALGO FLAGS\"] [-- BENCH FLAGS]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ -x $bin ]] || { echo "trace_vs_model: no ftcoll binary at $bin (cargo build --release --features trace)" >&2; exit 2; }
command -v python3 >/dev/null || { echo "trace_vs_model: needs python3 to read the JSON and print the table" >&2; exit 2; }
dir=${out:-$(mktemp -d)}
mkdir -p "$dir"
[[ -n $out ]] || trap 'rm -rf "$dir"' EXIT
read -r -a algo_flags <<<"$algo"
"$bin" bench --kill none --json --trace "$dir/measured.csv" "${algo_flags[@]}" "$@" >"$dir/bench.json"
read -r -a sim_flags <<<"$(python3 - "$dir/bench.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))["config"]
flags = ["--nodes", c["nodes"], "--os", c["os_ns"], "--or", c["or_ns"], "--L", c["L_ns"]]
if c.get("model_cores"):
    flags += ["--cores", c["model_cores"], "--core-visit", c.get("model_visit_ns") or 0,
              "--core-work", c.get("model_work_ns") or 0]
    # The same terms bench's own prediction used: within one core, and per ring polled.
    if c.get("model_local_work_ns") is not None:
        flags += ["--core-local-work", c["model_local_work_ns"]]
    if c.get("model_local_or_ns") is not None:
        flags += ["--core-local-receive", c["model_local_or_ns"]]
    if c.get("model_ring_poll_ns") and c.get("model_visit_ns"):
        flags += ["--core-poll-per-source", "%.3f" % c["model_ring_poll_ns"]]
print(" ".join(str(f) for f in flags))
PY
)"
"$bin" sim --runs 1 --faults 0 --no-progress "${sim_flags[@]}" "${algo_flags[@]}" --trace "$dir/model.csv" >/dev/null
echo "model: ftcoll sim ${sim_flags[*]} ${algo_flags[*]} (fixed costs, ns)"
python3 "$here/trace_summary.py" "$dir/measured.csv" "$dir/model.csv"
