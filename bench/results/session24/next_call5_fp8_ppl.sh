#!/usr/bin/env bash
# What an FP8 cache costs the GPU Llama end to end (issue 25: greedy agreement of the GPU model
# with an FP8 cache against bf16, reported as a rate; with perplexity): tools/kv_cache_ppl
# --device cuda on SmolLM2-135M-Instruct (Q4_1 GGUF, head_dim 64) over tests/data/kv_ppl_sample.txt,
# caches bf16 (the baseline), fp8_e4m3, fp8_e5m2. After next_call2/3 have passed. The GGUF (98 MB)
# is more than a call carries (64 MB), so three calls back to back while the machine stays warm:
#   here: bash scripts/fetch_model.sh; cmake --build build-gpu --target kv_cache_ppl flashserve_server;
#         bash scripts/gpu_pack.sh build-gpu/pack && rm -rf build-gpu/pack/{old,bench,tests} \
#           build-gpu/pack/server/{hf_dump,flashserve_server} build-gpu/pack/client;
#         split -n 2 -d ~/.cache/flashserve/models/SmolLM2-135M-Instruct.Q4_1.gguf build-gpu/gguf_part
#   call A (carry build-gpu/gguf_part00): cp build-gpu/gguf_part00 /tmp/
#   call B (carry build-gpu/gguf_part01): cp build-gpu/gguf_part01 /tmp/
#   call C (carry build-gpu/pack): bash bench/results/session24/next_call5_fp8_ppl.sh
# The CPU's figures for the same text (NOTES "FP8 KV cache (issue 25), CPU", fp32 model): e4m3
# dppl +0.24% and 51% greedy agreement over 6 x 32, e5m2 +2.18% and 28%; bf16 vs fp32 itself 69%.
# Prediction on the GPU (bf16 model, against its bf16 cache): e4m3 dppl +0.1..+0.5%, greedy
# agreement 40-70%; e5m2 +1..+3%, 20-50%.
set -uo pipefail
P=build-gpu/pack
export LD_LIBRARY_PATH="$PWD/$P/lib:/usr/local/cuda/lib64" FLASHSERVE_CUDA_FP8=1
out=${OUT:-/tmp/o}; mkdir -p "$out"
cat /tmp/gguf_part00 /tmp/gguf_part01 > /tmp/SmolLM2-135M-Instruct.Q4_1.gguf
ls -la /tmp/SmolLM2-135M-Instruct.Q4_1.gguf
timeout 500 $P/server/kv_cache_ppl /tmp/SmolLM2-135M-Instruct.Q4_1.gguf --device cuda --text tests/data/kv_ppl_sample.txt \
  --prefill 64 --greedy 32 2>&1 | tee "$out/kv_cache_ppl_cuda.log" | tail -12
