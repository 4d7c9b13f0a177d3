#!/usr/bin/env bash
# Hardware counters of one warp-specialized prefill launch per shape, on the GPU machine (a
# diagnostic; clocks left as they are). Usage: bash bench/ncu_prefill.sh OUTDIR [shape args...]
# where each shape is a quoted argument list of bench/profile_prefill.py, e.g. "--batch 16 --len 1024".
set -uo pipefail
cd "$(dirname "$0")/.."
out="$1"; shift
command -v ncu >/dev/null || { echo "ncu_prefill: no ncu here"; exit 0; }
for shape in "$@"; do
  name=$(echo "$shape" | tr -d ' -')
  timeout 150 ncu --clock-control none -k "regex:prefill_sm90_ws" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section LaunchStats \
    --metrics sm__cycles_active.avg,sm__cycles_elapsed.avg,sm__cycles_active.min,sm__cycles_active.max \
    python3 bench/profile_prefill.py --lib build-gpu/libflashserve_c.so $shape > "$out/ncu_$name.txt" 2>&1
  echo "== $shape"
  grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|DRAM Throughput|L2 Hit Rate|L1/TEX Hit|Warp Cycles Per Issued|sm__cycles|Grid Size|Registers" "$out/ncu_$name.txt" | head -16
done
