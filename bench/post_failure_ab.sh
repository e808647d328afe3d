#!/usr/bin/env bash
# Post-failure against failure-free ERA agreements of two ftcoll binaries, alternated: for each
# repetition and binary, three `agree --kill` runs (in process on one worker, N = 4; in process
# on the default workers, N = 32; UDP, N = 8), each printing the p50/mean (µs) of its
# failure-free and its post-failure agreements. docs/measurements.md, "Post-failure
# agreements".
#
# usage: bench/post_failure_ab.sh [-r REPS] BASE_FTCOLL NEW_FTCOLL
set -euo pipefail
reps=3
while getopts "r:" f; do
  case $f in
    r) reps=$OPTARG ;;
    *) echo "usage: $0 [-r REPS] BASE_FTCOLL NEW_FTCOLL" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[[ $# -eq 2 ]] || { echo "usage: $0 [-r REPS] BASE_FTCOLL NEW_FTCOLL" >&2; exit 2; }
for b in "$1" "$2"; do
  [[ -x $b ]] || { echo "post_failure_ab: no ftcoll binary at $b" >&2; exit 2; }
done
uptime
for ((rep = 1; rep <= reps; rep++)); do
  for bin in "$1" "$2"; do
    for cfg in "--nodes 4 --workers 1 --transport inproc --agreements 30000 --warmup 300 --kill 2@1500" \
               "--nodes 32 --transport inproc --agreements 4000 --warmup 300 --kill 16@1000" \
               "--nodes 8 --transport udp --agreements 10000 --warmup 300 --kill 4@5000"; do
      # shellcheck disable=SC2086
      r=$("$bin" agree $cfg --no-model 2>&1 | awk '/^(failure-free|post-failure) agreement/ {printf "%s %s/%s ", $1, $5, $6}')
      echo "rep $rep $bin [$cfg] p50/mean: $r"
    done
  done
done
uptime
