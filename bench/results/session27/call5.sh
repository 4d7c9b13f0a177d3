#!/usr/bin/env bash
# Session 27 call 5 (issue 27), after call 2: the serving table again, the server as the
# issue ran it (--num-blocks 32768 --max-num-seqs 256 --max-batched-tokens 8192, 1k prompts, 128
# out, concurrency 1, 64 and 256), now with decode graphs sized for the context
# (graph_table_width) and the device's view of each step (idle / prepare / run) in the phase
# table. Prediction in bench/NOTES.md ("Graph-replayed decode steps sized for the context").
# Carry build-gpu/pack.
set -uo pipefail
P=build-gpu/pack
export LD_LIBRARY_PATH="$PWD/$P/lib:/usr/local/cuda/lib64"
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
OUT=/tmp/serve IN=1024 OUTLEN=128 N1=16 N64=256 CONCURRENCY="1 64 256" timeout 560 bash scripts/gpu_serve_check.sh \
  $P/client/flashserve_bench \
  bf16=$P/server/flashserve_server,--num-blocks,32768,--max-num-seqs,256,--max-batched-tokens,8192 2>&1 |
  tee "$out/serve.log" | tail -12
cp /tmp/serve/*.json /tmp/serve/*.metrics "$out/" 2>/dev/null
