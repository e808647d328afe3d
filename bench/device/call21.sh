#!/usr/bin/env bash
# Twenty-first call (2026-11-27 evening): a relay's stages with the checked correction and
# without (`cargo bench --bench stages --features stages -- --relay N`, .dev/hS/stages built
# from b7e724a plus the relay mode), N = 16 and 8, twice each.
set -u
D=$PWD/.dev
chmod +x "$D"/hS/*
for rep in 1 2; do
  for n in 16 8; do
    timeout 100 "$D/hS/stages" --relay "$n" 2>&1
  done
done | tee "$OUT/relay.txt"
echo "load: $(cat /proc/loadavg)"
