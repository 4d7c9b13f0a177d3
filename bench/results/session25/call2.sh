#!/usr/bin/env bash
# Session 25 call 2 (issues 25 and 27): the FP8 opt-in dropped (FLASHSERVE_CUDA_FP8 is gone) and
# the skinny GEMMs on by default (steps of <= 16 tokens, epilogues launched, lm_head by cuBLAS).
# Built here: bash scripts/build_gpu.sh && cmake --build build-gpu --target flashserve_server
# flashserve_bench; bash scripts/gpu_pack.sh build-gpu/pack, less old/, bench_kvcache, hf_dump,
# kv_cache_ppl and every test but test_fp8_cuda and test_model_cuda (51 MB); carry build-gpu/pack.
# Steps (~9 min):
#  1. test_fp8_cuda (no opt-in now), test_model_cuda (every model test now runs the skinny path
#     on its decode steps; the FP8 cache against the CPU's, its NOTE line the greedy agreement).
#  2. bench_model --quick: decode steps (batch 1, 16; 1k, 8k) with cuBLAS and skinny (fused /
#     launched epilogue), the per-GEMM table. Prediction: skinny-l at (1,1k) ~30 us under
#     session 24's 5.208 ms (lm_head by cuBLAS now).
#  3. The server on synthetic:llama3-8b, 2k prompts, 128 out, concurrency 1 and 64: a bf16 cache
#     and an fp8_e4m3 cache (skinny on, the default). Predictions: FP8 at concurrency 64 median
#     TPOT 0.75-0.9x bf16's; concurrency 1 level; concurrency 1 TPOT near bench_model's skinny-l.
set -uo pipefail
P=build-gpu/pack
export LD_LIBRARY_PATH="$PWD/$P/lib:/usr/local/cuda/lib64"
out=${OUT:-/tmp/o}; mkdir -p "$out" /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 40 $P/tests/test_fp8_cuda > "$out/test_fp8.log" 2>&1
echo "fp8 rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" "$out/test_fp8.log" | head -8
timeout 150 $P/tests/test_model_cuda > "$out/test_model.log" 2>&1
echo "model rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_model.log" | tr '\n' ' ')"
grep -E "NOTE|Failure|FAILED|Expected|Which is" "$out/test_model.log" | head -14
timeout 150 $P/bench/bench_model --quick > "$out/bench_model.log" 2>&1
echo "bench_model rc $?"
grep -A8 "^batch" "$out/bench_model.log" | head -10
OUT="$out/serve" IN=2048 OUTLEN=128 N1=8 N64=128 timeout 150 bash scripts/gpu_serve_check.sh $P/client/flashserve_bench \
  bf16=$P/server/flashserve_server fp8_e4m3=$P/server/flashserve_server,--kv-cache-dtype,fp8_e4m3 2>&1 | tee "$out/serve.log" | tail -12
