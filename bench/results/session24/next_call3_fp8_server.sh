#!/usr/bin/env bash
# Session 24 (no GPU) put the CUDA model and the server on an FP8 KV cache (issue 25): the model
# takes --kv-cache-dtype fp8_e4m3/fp8_e5m2 (opted in with FLASHSERVE_CUDA_FP8=1 until the FP8
# kernels have run), calibrates each layer's scales on its first prefill on the device (kv_amax,
# then KvScales, shared with the CPU model; on that first write rotary alone, then KVStorage's
# quantizing append; afterwards the fused rotary + append quantizes); decode and paged prefill
# read the FP8 pages. Never run. Its first GPU call,
# after next_call2_fp8.sh has passed (the kernels it relies on), prepared here:
#   bash scripts/build_gpu.sh && cmake --build build-gpu --parallel 2 --target flashserve_server flashserve_bench
#   bash scripts/gpu_pack.sh build-gpu/pack && rm -rf build-gpu/pack/old build-gpu/pack/bench \
#     build-gpu/pack/tests/test_{decode,prefill,kv_storage,sampler,fp8,skinny_gemm}_cuda build-gpu/pack/server/{hf_dump,kv_cache_ppl}
#   (about 40 MB), carry build-gpu/pack, then
#   bash bench/results/session24/next_call3_fp8_server.sh
# Steps (~6 min): test_model_cuda (LlamaCuda.Fp8CacheMatchesTheCpuModelsFp8Cache: the GPU model
# with an FP8 cache against the CPU model's, calibrated scales equal, graph replay = eager, and
# its NOTE line: logits and greedy tokens against the bf16 cache), the load client against
# synthetic:llama3-8b with a bf16 and an fp8_e4m3 cache, 2k prompts, 128 out, concurrency 1 and 64
# (with the step phases a step on the GPU server: issue 27's host share, never measured there),
# then server_flags_test.sh cuda (the FP8 pool's sizing on the GPU: 1 MiB a block, twice the blocks).
# Prediction: concurrency 1 within the spread (the weights dominate: 16 GB against 0.26 GB of
# K/V); concurrency 64, 2k context: decode steps read 64 x 2k x 128 KiB = 17 GB of bf16 K/V
# against 16 GB of weights, so FP8 pages cut the step's bytes by about a quarter: median TPOT
# 0.75-0.9x the bf16 cache's (prefill chunks share those steps too).
set -uo pipefail
P=build-gpu/pack
export LD_LIBRARY_PATH="$PWD/$P/lib:/usr/local/cuda/lib64" FLASHSERVE_CUDA_FP8=1
out=${OUT:-/tmp/o}; mkdir -p "$out" /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 150 $P/tests/test_model_cuda > /tmp/w/test_model.log 2>&1
echo "model rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_model.log | tr '\n' ' ')"
grep -E "NOTE|Failure|FAILED|Expected|Which is" /tmp/w/test_model.log | head -12
OUT=/tmp/w/serve IN=2048 OUTLEN=128 N1=8 N64=128 timeout 220 bash scripts/gpu_serve_check.sh $P/client/flashserve_bench \
  bf16=$P/server/flashserve_server fp8_e4m3=$P/server/flashserve_server,--kv-cache-dtype,fp8_e4m3 2>&1 | tee /tmp/w/serve.log | tail -14
timeout 190 bash tests/server_flags_test.sh $P/server/flashserve_server cuda > /tmp/w/flags.log 2>&1
echo "server flags (cuda) rc $?: $(tail -1 /tmp/w/flags.log)"
grep -E "FAIL|fp8" /tmp/w/flags.log | head -8
cd /tmp/w && tar cJf "$out/call3_logs.tar.xz" ./*.log serve 2>/dev/null
