#!/usr/bin/env bash
# Session 26 call 1 (issues 25 and 22's paged prefill over FP8, the warp-specialized FP8 instance): its
# producer made to overlap (each slot's next codes copied right after this thread's conversion of
# the last ones: a tile's MMAs for every copy to land in; session 25 call 3 waited on each copy
# right after issuing it: 347 TFLOP/s, 0.59 of bf16 pages) and its stores without bank conflicts.
# Built here with bash scripts/build_gpu.sh; carry build-gpu/libflashserve_c.so,
# build-gpu/tests/test_fp8_cuda, build-gpu/tests/test_prefill_cuda.
# Prediction: 0.75-0.85 of the bf16 pages (the copies' latency off the producer's path; what is
# left: the conversion's shared-memory traffic, 288 KB a tile against bf16's 224 KB, and the
# producer's spills at 24 registers).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-gpu
timeout 150 $B/tests/test_fp8_cuda > "$out/test_fp8.log" 2>&1
echo "fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is|max err|mismatch" "$out/test_fp8.log" | head -16
timeout 150 $B/tests/test_prefill_cuda --gtest_brief=1 > "$out/test_prefill.log" 2>&1
echo "prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_prefill.log" | head -6
for tool in memcheck synccheck racecheck; do
  timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_fp8_cuda \
    --gtest_filter='Fp8PrefillCuda.RefusedWithoutScalesOrAnFp8Instance:Fp8PrefillCuda.WsPipelineOverManyTiles' > "$out/san_$tool.log" 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.log" | tail -1)"
done
for pass in 1 2; do
  timeout 70 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --chunked-only --rounds 3 \
    --json "$out/bench_prefill_fp8_$pass.json" > "$out/bench_prefill_fp8_$pass.log" 2>&1
  echo "bench pass $pass rc $?"; grep -E "FP8|^bfloat" "$out/bench_prefill_fp8_$pass.log" | tail -3
done
# (issue 22) prefill v4.17: O by TMA stores from a shared-memory buffer (d 128 at 128 keys, d 64),
# against the registers' 16-byte stores (FLASHSERVE_PREFILL_WS_TMA_O=0), 3 passes, same process:
# 16x1k, 4x4k, 1x16k causal, 4x4k causal paged 16, 8x2k, d 64 4x4k, the skew row.
# Prediction: +3-6% at 16x1k (the store took 1.1-1.2 us of an item's ~18, and held up the next
# item's loads), +1-2% at 4x4k and 8x2k, level on 1x16k.
timeout 290 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --only 0,1,2,3,5,6,20,21,15,24 --passes 3 \
  --config regs=FLASHSERVE_PREFILL_WS_TMA_O=0 2>&1 | tee "$out/ab_tma_o.log"
