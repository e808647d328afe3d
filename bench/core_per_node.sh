#!/usr/bin/env bash
# bench/core_per_node.sh: everything a machine with a core per node should measure, in one run,
# for the tables of docs/measurements.md ("Measured against modeled, a core per node" and
# "Against Open MPI"): the machine's description, measured / modeled for N = 2, 4, 8, 16 ×
# {udp, inproc} × {checked, --correction none} (bench/fidelity_cores.sh), the 2-node stage
# breakdown when a stages build is given, ftcoll's broadcast beside Open MPI's
# (bench/peers/run.sh) and ftcoll's agreement beside ULFM's (bench/peers/agree.sh).
#
#   bench/core_per_node.sh OUT_DIR
#
# With cargo and network this builds and installs what it needs (through the scripts it calls).
# On a host with neither, build here and point it at the results (the scripts document each):
#   FTCOLL_BIN=ftcoll  OMPI_PREFIX=openmpi-prefix  PEERS_BUILD=dir-with-bcast_loop,agree_loop,udp_pingpong
#   STAGES_BIN=`CARGO_TARGET_DIR=target/stages cargo bench --bench stages --features stages --no-run`'s
#     executable (optional; its own target directory: in the default one that build replaces
#     target/release/ftcoll with a `stages` build, whose clock reads slow every broadcast)
# Knobs: FIDELITY_NODES ("2 4 8 16"), FIDELITY_ITERS (5000), PEERS_NODES ("2 4 8 16"),
# PEERS_ITERS (10000), AGREE_NODES ("8"), AGREE_QUICK (set: 2000 agreements), PART_TIMEOUT (seconds per part, 240).
# Every part is bounded by `timeout`; a part that fails is said and the others still run; the
# exit status is the number of failed parts.
set -uo pipefail
out=${1:?usage: bench/core_per_node.sh OUT_DIR}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$out"
bin=${FTCOLL_BIN:-$here/../target/release/ftcoll}
part_timeout=${PART_TIMEOUT:-240}
failed=0
# A `stages` build (`--version` ends in `+stages`) measures its own clock reads too.
if "$bin" --version 2>/dev/null | grep -q '+stages'; then
  echo "core_per_node: $bin is a build with the stages feature (its clock reads slow every broadcast): rebuild it without (cargo build --release)" >&2
  exit 2
fi

part() { # NAME CMD... : runs CMD bounded, output to OUT/NAME.txt (and the terminal)
  local name=$1 rc=0 t0=$SECONDS
  shift
  echo "==> $name: $*"
  timeout --kill-after=5 "$part_timeout" "$@" </dev/null 2>&1 | tee "$out/$name.txt" || rc=$?
  echo "<== $name: exit $rc after $((SECONDS - t0)) s"
  ((rc == 0)) || failed=$((failed + 1))
}

{
  echo "date: $(date -u +%FT%TZ)"
  echo "kernel: $(uname -sr)"
  echo "cores: $(nproc) online; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')"
  echo "memory: $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
  command -v lscpu >/dev/null && lscpu | grep -E '^(Socket|Core|Thread|NUMA node\(s\)|Model name|CPU MHz|Hypervisor)' || true
  echo "ftcoll: $("$bin" --version 2>&1) ${FTCOLL_REV:-}"
} | tee "$out/machine.txt"

part fidelity bash "$here/fidelity_cores.sh" -b "$bin" -i "${FIDELITY_ITERS:-5000}" \
  -n "${FIDELITY_NODES:-2 4 8 16}" -o "$out/fidelity.jsonl" -s "$out/calibration"
if [[ -n ${STAGES_BIN:-} ]]; then
  part stages "$STAGES_BIN" --bench
fi
part peers bash "$here/peers/run.sh" --nodes "${PEERS_NODES:-2 4 8 16}" \
  --iterations "${PEERS_ITERS:-10000}" --warmup 1000 --timeout 60
agree_quick=()
[[ -n ${AGREE_QUICK:-} ]] && agree_quick=(--quick)
part agree bash "$here/peers/agree.sh" --nodes "${AGREE_NODES:-8}" "${agree_quick[@]}"
echo "core_per_node: $failed part(s) failed; results in $out"
exit "$failed"
