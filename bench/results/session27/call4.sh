#!/usr/bin/env bash
# Session 27 call 4 (issue 27), optional, after call 2: why the skinny GEMMs stream below the
# read limit (gate|up 73%, down 64% alone, session 25; cuBLAS 80% on gate|up). ncu, clocks left as
# they are, --set full on one steady-state launch of each decode projection at 1 row: the skinny
# kernel (its epilogue launched) and cuBLAS's kernel, from bench_model --gemms filtered to one
# table cell (FLASHSERVE_BENCH_GEMM / _ROWS / _COLUMN). Read: DRAM throughput, achieved
# occupancy, warp stall reasons (long scoreboard = waiting on the weights' loads), bytes in
# flight. Carry build-gpu/bench/bench_model.
source bench/results/call_prologue.sh
command -v ncu >/dev/null || export PATH="$PATH:/usr/local/cuda/bin"
command -v ncu >/dev/null || { echo "no ncu here"; exit 0; }
for b in 1 16; do
  FLASHSERVE_PROFILE_BATCH=$b timeout 150 ncu --clock-control none --profile-from-start off --csv \
    --metrics gpu__time_duration.sum build-gpu/bench/bench_model --profile-step > "$out/step_b$b.csv" 2>&1
  echo "$(el) step breakdown batch $b rc $?"; python3 bench/step_breakdown.py "$out/step_b$b.csv" "batch $b, 1k keys"
done
for g in "gate|up" down qkv o; do
  for col in skinny-l cublas; do
    if [ $col = skinny-l ]; then k="regex:skinny_gemm_kernel"; else k="regex:gemm|gemv|xmma|cutlass"; fi
    name="$(echo "$g" | tr -d '|')_$col"
    FLASHSERVE_BENCH_GEMM="$g" FLASHSERVE_BENCH_ROWS=1 FLASHSERVE_BENCH_COLUMN=$col timeout 100 \
      ncu --clock-control none -k "$k" --launch-skip 40 --launch-count 1 --set full \
      build-gpu/bench/bench_model --gemms > "$out/ncu_$name.txt" 2>&1
    echo "$(el) == $g $col rc $?"
    grep -E "^  [a-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Warp Cycles Per Issued|Stall|L2 Hit Rate" \
      "$out/ncu_$name.txt" | head -14
  done
done
