#!/usr/bin/env bash
# Session 26 call 5 (issue 25): our FP8 decode beside both peers' FP8 decode in one run, the
# issue's table (session 25 had FA3 only): bench_decode.py --fp8 e4m3 on the rows, our
# e4m3 pages against our bf16 pages, FA3's flash_attn_with_kvcache over bf16 and FP8 pages, and
# FlashInfer's paged decode (tensor cores, fa2) over bf16 and per-tensor FP8 pages (its JIT on
# first use: ~1-2 min). Carry .whl and build-gpu/libflashserve_c.so (right after call 2 while the
# machine is warm, the wheels are unpacked already).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
source scripts/gpu_peers.sh install
timeout 540 python3 bench/bench_decode.py --lib build-gpu/libflashserve_c.so --fp8 e4m3 --no-flex \
  --only "(64,8k)" --only "(128,2k)" --only "(256,1k)" --only "(1,32k)" --json "$out/bench_decode_fp8.json" \
  > "$out/bench_decode_fp8.log" 2>&1
echo "bench_decode rc $?"
tail -n 12 "$out/bench_decode_fp8.log"
