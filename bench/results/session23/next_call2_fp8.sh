#!/usr/bin/env bash
# Session 23 (no GPU) wrote the CUDA decode over FP8 pages (issue 25, decode_kernel.cuh's kFp8
# branches; decode.md "FP8 pages in the split kernel"), never run. Its first GPU call, prepared
# here: build with scripts/build_gpu.sh and `bash scripts/gpu_peers.sh prepare` and
# `prepare-flashinfer` (FA3 23 MB, FlashInfer 14 MB), carry build-gpu/tests/test_fp8_cuda,
# build-gpu/tests/test_decode_cuda, build-gpu/libflashserve_c.so and .whl, then
#   bash bench/results/session23/next_call2_fp8.sh
# (about 61 MB with the tree's 7: if a call refuses the size, carry .whl alone first with
# `source scripts/gpu_peers.sh install`, which unpacks into /tmp while the machine stays warm.)
# Steps (at most ~540 s; the sanitizers are next_call2b_fp8_sanitize.sh, session 24): the FP8 decode tests (float64 over the dequantized values and the CPU, both
# formats, bf16/fp16 q, d 64/128, groups 1-8, q_len 1-3, pages 1-256, 0/1/3 splits), the 16-bit
# decode tests (their SASS is unchanged; a regression check), then bench_decode.py --fp8 e4m3 on the issue's rows beside our bf16 pages, FA3's paged
# decode and FlashInfer's (tensor cores, fa2; its JIT takes 1-2 minutes the first time), bf16 and FP8.
# Prediction: 1.7-1.9x our bf16 token rate at (64,8k), (128,2k), (256,1k); 1.4-1.6x at (1,32k).
# Session 24 added the paged prefill over FP8 pages (prefill.md "FP8 pages in the mma.sync
# kernel"): test_fp8_cuda runs its tests too (Fp8PrefillCuda.*), and bench_prefill.py
# --chunked-only times it on the 2k-over-30k row beside our bf16 pages and FA3 (~40 s more).
# Prediction: 0.45-0.6 of the bf16 pages' TFLOP/s.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out" /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-gpu
timeout 100 $B/tests/test_fp8_cuda > /tmp/w/test_fp8.log 2>&1
echo "fp8 (storage, decode, prefill) rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_fp8.log | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is|NOTE" /tmp/w/test_fp8.log | head -14
timeout 40 $B/tests/test_fp8_cuda --gtest_filter='Fp8PrefillCuda.*' --gtest_repeat=3 --gtest_brief=1 > /tmp/w/test_fp8_repeat.log 2>&1
echo "fp8 prefill x3 rc $?"
timeout 60 $B/tests/test_decode_cuda --gtest_brief=1 > /tmp/w/test_decode.log 2>&1
echo "decode rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_decode.log | tr '\n' ' ')"
source scripts/gpu_peers.sh install
timeout 250 python3 bench/bench_decode.py --lib $B/libflashserve_c.so --fp8 e4m3 --no-flex \
  --only "(64,8k)" --only "(128,2k)" --only "(256,1k)" --only "(1,32k)" --json "$out/bench_decode_fp8.json" 2>&1 | tee "$out/bench_decode_fp8.log" | tail -8
timeout 70 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --chunked-only --rounds 3 \
  --json "$out/bench_prefill_fp8.json" 2>&1 | tee "$out/bench_prefill_fp8.log" | tail -4
cd /tmp/w && tar cJf "$out/call2_logs.tar.xz" ./*.log
