#!/usr/bin/env bash
# Session 25 call 4 (issue 25): the server with a bf16 and an fp8_e4m3 cache again, as call 2,
# now that FP8 chunks take the warp-specialized kernel (call 3). Built here: build_gpu.sh, the
# server and client targets, gpu_pack.sh less bench/, tests/, hf_dump and kv_cache_ppl; carry
# build-gpu/pack. Prediction: concurrency 64 FP8 TPOT at or below bf16's (call 2: 12.02 against
# 11.26 ms); concurrency 1 level.
set -uo pipefail
P=build-gpu/pack
export LD_LIBRARY_PATH="$PWD/$P/lib:/usr/local/cuda/lib64"
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
OUT=/tmp/serve IN=2048 OUTLEN=128 N1=8 N64=128 timeout 170 bash scripts/gpu_serve_check.sh $P/client/flashserve_bench \
  bf16=$P/server/flashserve_server fp8_e4m3=$P/server/flashserve_server,--kv-cache-dtype,fp8_e4m3 2>&1 | tee "$out/serve.log" | tail -12
cp /tmp/serve/*.json "$out/" 2>/dev/null
