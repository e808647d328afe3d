#!/usr/bin/env bash
# A/B of ftcoll binaries where nodes share cores (more nodes than workers, as on a 2-core
# machine): `bench ... --json` for each configuration below, the binaries alternated REPS times in
# one run (drift and load hit every binary alike). Prints one row per run: the coloring p50
# measured / modeled (µs) and their ratio, pooled and for each segment between crashes, and the
# model's shared-core parameters (visit, work, and within one core: work and receive, ns); then
# per binary how many p50 ratios (pooled, and every segment with a crashed node) fell within
# [0.8, 1.25]. Exits 1 if a run failed (its row says FAILED).
#   bench/shared_cores_ab.sh [-r REPS] [-i ITERATIONS] BINARY...
#   e.g. bench/shared_cores_ab.sh -r 3 /tmp/ftcoll-old target/release/ftcoll
set -uo pipefail
reps=2 iters=10000
usage() { echo "usage: $0 [-r REPS] [-i ITERATIONS] BINARY..." >&2; exit 2; }
while getopts "r:i:" f; do
  case $f in
    r) reps=$OPTARG ;; i) iters=$OPTARG ;; *) usage ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -ge 1 ]] || usage
for b in "$@"; do [[ -x $b ]] || { echo "shared_cores_ab: $b is not an executable" >&2; exit 2; }; done
command -v python3 >/dev/null || { echo "shared_cores_ab: needs python3" >&2; exit 2; }
# The crash lands at a third of the measured window (iterations count from the warmup's start).
warm=$((iters / 10)) kill_at=$((iters / 10 + iters / 3))
configs=(
  "--nodes 2 --workers 1 --correction none --kill none"
  "--nodes 2 --workers 1 --correction none --kill none --transport inproc"
  "--nodes 3 --workers 1 --correction none --kill none"
  "--nodes 3 --workers 1 --correction none --kill none --transport inproc"
  "--nodes 4 --kill none"
  "--nodes 4 --kill 1@$kill_at"
  "--nodes 8 --kill none"
  "--nodes 8 --correction none --kill none"
  "--nodes 8 --kill 1@$kill_at"
  "--nodes 16 --kill none"
  "--nodes 4 --kill none --transport inproc"
  "--nodes 8 --kill none --transport inproc"
  "--nodes 8 --correction none --kill none --transport inproc"
  "--nodes 8 --workers 1 --kill none --transport inproc"
  "--nodes 8 --kill 1@$kill_at --transport inproc"
  "--nodes 16 --kill none --transport inproc"
)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "cores: $(nproc); load: $(cut -d' ' -f1-3 /proc/loadavg); $iters iterations after $warm of warmup per run"
failed=0
for rep in $(seq "$reps"); do
  for c in "${configs[@]}"; do
    bi=0
    for b in "$@"; do
      bi=$((bi + 1))
      # shellcheck disable=SC2086
      if ! "$b" bench $c --iterations "$iters" --warmup "$warm" --json >"$tmp/out.json" 2>"$tmp/err"; then
        echo "$rep | $c | B$bi | FAILED: $(tail -1 "$tmp/err")"
        failed=1
        continue
      fi
      python3 - "$tmp/out.json" "$rep" "$c" "B$bi" <<'PY' | tee -a "$tmp/rows"
import json, sys
d = json.load(open(sys.argv[1]))
p = d["prediction"]["coloring"]
cfg = d["config"]
row = [sys.argv[2], sys.argv[3], sys.argv[4],
       "pooled %.2f/%.2f %.2f" % (p["measured_us"]["p50"], p["predicted_us"]["p50"], p["ratio"]["p50"])]
for s in d.get("segments", []):
    q = s["prediction"]["coloring"]
    row.append("dead=%s %.2f/%.2f %.2f" % (",".join(map(str, s["dead"])) or "-", q["measured_us"]["p50"],
                                          q["predicted_us"]["p50"], q["ratio"]["p50"]))
g = lambda k: cfg.get(k)
row.append("visit %s work %s local work %s receive %s" % (g("model_visit_ns"), g("model_work_ns"),
                                                         g("model_local_work_ns"), g("model_local_or_ns")))
print(" | ".join(row))
PY
    done
  done
done
echo "p50 ratios within [0.8, 1.25] (pooled, and each segment with a crashed node):"
python3 - "$tmp/rows" "$@" <<'PY'
import sys
rows = [l.rstrip("\n").split(" | ") for l in open(sys.argv[1])]
for i, b in enumerate(sys.argv[2:], start=1):
    ratios = []
    for r in rows:
        if r[2] != "B%d" % i:
            continue
        ratios.append(float(r[3].split()[-1]))
        ratios += [float(f.split()[-1]) for f in r[4:] if f.startswith("dead=") and not f.startswith("dead=-")]
    inside = sum(0.8 <= x <= 1.25 for x in ratios)
    print("B%d %s: %d of %d" % (i, b, inside, len(ratios)))
PY
exit $failed
