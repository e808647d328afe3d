#!/usr/bin/env bash
# Regenerates every figure of docs/measurements.md's "Figures" section: each image here is the output of
# one command below (SVG and PNG), and each table next to it (*.txt) the values it plots
# (with the command's notes, e.g. runs that left live processes uncolored).
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --quiet
ftcoll=target/release/ftcoll
fig=docs/figures

# Simulator (LogP, L = 2, o = 1, 1% of the processes dead before the broadcast).
$ftcoll plot scaling --nodes 1024,4096,16384,65536 --runs 50 \
    --algos "corrected-tree --tree binomial;corrected-tree --tree optimal;corrected-gossip;big" \
    --out $fig/scaling.svg --out $fig/scaling.png 2>&1 | tee $fig/scaling.txt
$ftcoll plot messages --nodes 1024,4096,16384,65536 --runs 10 \
    --algos "corrected-tree --tree binomial;corrected-gossip;big;gossip" \
    --out $fig/messages.svg --out $fig/messages.png 2>&1 | tee $fig/messages.txt
$ftcoll plot correction --nodes 16384 --runs 100 --faults 0.01%,0.1%,0.5%,1%,2%,4% \
    --algos "corrected-tree --correction checked;corrected-tree --correction failproof:1;corrected-tree --correction optimized:4 --start overlapped" \
    --out $fig/correction.svg --out $fig/correction.png 2>&1 | tee $fig/correction.txt

# A local 8-node UDP cluster (rank 1 crashes halfway), its histograms and its report.
$ftcoll bench --iterations 3000 --warmup 300 --hlog $fig/bench.hlog --json > $fig/bench.json
$ftcoll plot cdf $fig/bench.hlog --log-y --out $fig/cdf.svg --out $fig/cdf.png 2>&1 | tee $fig/cdf.txt
$ftcoll plot compare $fig/bench.json --out $fig/compare.svg --out $fig/compare.png 2>&1 | tee $fig/compare.txt
