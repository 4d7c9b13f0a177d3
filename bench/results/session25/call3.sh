#!/usr/bin/env bash
# Session 25 call 3 (issue 25, the FP8 row of issue 22's kernel): FP8 pages in the warp-specialized
# prefill kernel (prefill_sm90_ws_hd128_fp8.cu; prefill.md "FP8 pages in the warp-specialized
# kernel"), never run before. Built here with bash scripts/build_gpu.sh; carry
# build-gpu/libflashserve_c.so, build-gpu/tests/test_fp8_cuda, build-gpu/tests/test_prefill_cuda.
# Steps (~5 min): the FP8 tests (every prefill case by the default kernel, the forced mma.sync
# one and a 3-CTA persistent grid), the 16-bit prefill tests (the kernel's file changed; its
# 16-bit instances' consumers are instruction for instruction v4.16's), compute-sanitizer on a
# small FP8 prefill (d 128 by the new instance, and the refusals), then bench_prefill --chunked-only: 2k over 30k in 16-token pages, e4m3
# against bf16 pages, by default and with the mma.sync kernel forced.
# Prediction: 0.8-0.9 of the bf16 pages' TFLOP/s (session 25 call 1: mma.sync's FP8 0.40).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-gpu
timeout 120 $B/tests/test_fp8_cuda > "$out/test_fp8.log" 2>&1
echo "fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is|max err|mismatch" "$out/test_fp8.log" | head -16
timeout 150 $B/tests/test_prefill_cuda --gtest_brief=1 > "$out/test_prefill.log" 2>&1
echo "prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_prefill.log" | head -6
for tool in memcheck synccheck racecheck; do
  timeout 45 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_fp8_cuda \
    --gtest_filter='Fp8PrefillCuda.RefusedWithoutScalesOrAnFp8Instance' > "$out/san_$tool.log" 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$tool.log" | tail -1)"
done
timeout 70 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --chunked-only --rounds 3 \
  --json "$out/bench_prefill_fp8.json" > "$out/bench_prefill_fp8.log" 2>&1
echo "bench (default) rc $?"; grep -E "FP8|^bfloat" "$out/bench_prefill_fp8.log" | tail -3
FLASHSERVE_PREFILL_KERNEL=mma timeout 70 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --chunked-only --rounds 3 \
  > "$out/bench_prefill_fp8_mma.log" 2>&1
echo "bench (mma.sync forced) rc $?"; grep -E "FP8|^bfloat" "$out/bench_prefill_fp8_mma.log" | tail -3
# (issue 22) The varlen skew rows with the 176-key tile forced against the default (the rule
# takes 128 keys there: the mean keys a sequence are ~400, while one 8k sequence does ~90% of
# the work; call 1's ws_alt column read +4-5%): 3 passes.
timeout 70 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --only 24,25,26,28 --passes 3 \
  --config wide=FLASHSERVE_PREFILL_WS_BLOCK_N=176 2>&1 | tee "$out/ab_skew_wide.log"
