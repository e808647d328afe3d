#!/usr/bin/env bash
# `ftcoll bench --join` (or `agree --join`) through an MPI launcher: Open MPI's mpirun or MPICH's mpiexec start one
# ftcoll per rank, which reads its rank from OMPI_COMM_WORLD_RANK or PMI_RANK; every rank finds
# rank 0 (the first host) and rank 0 prints the run's one JSON result, saved to --out.
#
# usage: cluster-scripts/mpirun.sh -n N [options] [-- bench flags]
#   -n N               ranks (>= 2)
#   --hostfile FILE    hosts, first line is rank 0's host [all ranks on this host]
#   --launcher L       openmpi | mpich                                          [openmpi]
#   --mpirun PATH      the launcher executable                  [mpirun or mpiexec on PATH]
#   --bin PATH         ftcoll binary (same path on every host)   [target/release/ftcoll]
#   --port P           rank 0's coordinator port                                    [47000]
#   --algo "FLAGS"     algorithm flags [--algo corrected-tree --tree binomial --correction checked]
#   --kill SPEC        crashes, as `ftcoll bench --kill`                             [none]
#   --out FILE         the JSON result                            [ftcoll-mpirun.json]
#   --agree            ERA agreements (`ftcoll agree --join`) instead of bench: --kill R@I makes
#                      rank R SIGKILL itself; flags after -- go to agree
#   --dry-run          print the launcher command instead of running it
set -euo pipefail

die() { echo "mpirun.sh: $*" >&2; exit 2; }
say() { echo "mpirun.sh: $*" >&2; }

N="" HOSTFILE="" LAUNCHER=openmpi MPIRUN="" BIN="" PORT=47000 KILL=none OUT=ftcoll-mpirun.json DRY=0 AGREE=0
ALGO="--algo corrected-tree --tree binomial --correction checked" EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    -n|--np) N="${2:?}"; shift 2 ;;
    --hostfile) HOSTFILE="${2:?}"; shift 2 ;;
    --launcher) LAUNCHER="${2:?}"; shift 2 ;;
    --mpirun) MPIRUN="${2:?}"; shift 2 ;;
    --bin) BIN="${2:?}"; shift 2 ;;
    --port) PORT="${2:?}"; shift 2 ;;
    --algo) ALGO="${2:?}"; shift 2 ;;
    --kill) KILL="${2:?}"; shift 2 ;;
    --out) OUT="${2:?}"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    --agree) AGREE=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '6,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
done

if ! [[ "$N" =~ ^[0-9]+$ ]] || ! (( N >= 2 )); then die "-n must be an integer >= 2, got '${N:-nothing}'"; fi
if ! [[ "$PORT" =~ ^[0-9]+$ ]] || ! (( PORT > 0 && PORT < 65536 )); then die "--port must be 1..65535, got '$PORT'"; fi
case "$LAUNCHER" in
  openmpi) DEFAULT_MPIRUN=mpirun ;;
  mpich) DEFAULT_MPIRUN=mpiexec ;;
  *) die "--launcher must be openmpi or mpich, got '$LAUNCHER'" ;;
esac
if [[ -n "$HOSTFILE" ]]; then
  [[ -r "$HOSTFILE" ]] || die "cannot read hostfile '$HOSTFILE'"
  FIRST="$(awk '!/^[[:space:]]*(#|$)/ { sub(/[: ].*/, "", $1); print $1; exit }' "$HOSTFILE")"
  [[ -n "$FIRST" ]] || die "hostfile '$HOSTFILE' names no host"
  ROOT_IP="$(getent ahostsv4 "$FIRST" 2>/dev/null | awk 'NR == 1 { print $1 }')"
  [[ -n "$ROOT_IP" ]] || ROOT_IP="$FIRST"
else
  ROOT_IP=127.0.0.1
fi
[[ -n "$BIN" ]] || BIN="$(cd "$(dirname "$0")/.." && pwd)/target/release/ftcoll"
MPIRUN="${MPIRUN:-$(command -v "$DEFAULT_MPIRUN" || true)}"
if (( ! DRY )); then
  [[ -x "$BIN" ]] || die "ftcoll binary not found at '$BIN' (cargo build --release, or --bin PATH)"
  [[ -n "$MPIRUN" && -x "$MPIRUN" ]] || die "$DEFAULT_MPIRUN not found (install MPI, or --mpirun PATH)"
fi
MPIRUN="${MPIRUN:-$DEFAULT_MPIRUN}"

# One secret key for the job's packets, exported to every rank (Open MPI: -x; Hydra
# forwards the environment); never printed.
if [[ -z "${FTCOLL_KEY:-}" ]]; then
  FTCOLL_KEY="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
fi
export FTCOLL_KEY

read -r -a ALGO_ARGS <<< "$ALGO"
# Every agreement kill is a SIGKILL of the rank's own process.
CRASH=0
[[ "$KILL" != *sigkill* ]] || CRASH=1
(( ! AGREE )) || [[ "$KILL" == none ]] || CRASH=1
# Blocking nodes when the ranks share this host's cores; busy polling across hosts.
POLL=busy
if [[ -z "$HOSTFILE" ]] && (( N + 1 > $(nproc) )); then POLL=blocking; fi
if [[ "$LAUNCHER" == openmpi ]]; then
  if [[ -z "$HOSTFILE" ]] && (( N > $(nproc) )); then
    LAUNCH=("$MPIRUN" -n "$N" --oversubscribe --bind-to none)
  else
    LAUNCH=("$MPIRUN" -n "$N" --bind-to core --map-by core)
  fi
  [[ "$(id -u)" != 0 ]] || LAUNCH+=(--allow-run-as-root)
  LAUNCH+=(-x FTCOLL_KEY)
  # A rank that crashes on purpose must not take the job down (Open MPI 5 / PRRTE: ULFM's
  # fault-tolerance mode keeps the other ranks running).
  (( ! CRASH )) || LAUNCH+=(--with-ft ulfm)
  [[ -z "$HOSTFILE" ]] || LAUNCH+=(--hostfile "$HOSTFILE")
else
  LAUNCH=("$MPIRUN" -n "$N" -bind-to core)
  # Hydra: keep the other ranks when one is SIGKILLed on purpose.
  (( ! CRASH )) || LAUNCH+=(-disable-auto-cleanup)
  [[ -z "$HOSTFILE" ]] || LAUNCH+=(-f "$HOSTFILE")
fi
if (( AGREE )); then
  CMD=("${LAUNCH[@]}" "$BIN" agree --join "$ROOT_IP:$PORT" --kill "$KILL" --json "${EXTRA[@]}")
else
  CMD=("${LAUNCH[@]}" "$BIN" bench --join "$ROOT_IP:$PORT" "${ALGO_ARGS[@]}" --kill "$KILL" --poll "$POLL" --json "${EXTRA[@]}")
fi

say "$N ranks through $LAUNCHER, rank 0 at $ROOT_IP:$PORT, result in $OUT"
if (( DRY )); then
  printf '%q ' "${CMD[@]}"; echo
  exit 0
fi
"${CMD[@]}" > "$OUT.tmp" || { rc=$?; [[ -s "$OUT.tmp" ]] || { rm -f "$OUT.tmp"; die "the launcher failed (exit $rc)"; }; }
# Only rank 0 prints; keep its JSON line.
grep '^{' "$OUT.tmp" | tail -n1 > "$OUT" && rm -f "$OUT.tmp"
[[ -s "$OUT" ]] || die "rank 0 printed no result"
say "result: $OUT"
