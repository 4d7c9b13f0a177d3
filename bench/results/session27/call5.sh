#!/usr/bin/env bash
# Session 27 call 5 (issue 27), after call 2: the serving table again, the server as the
# issue ran it (--num-blocks 32768 --max-num-seqs 256 --max-batched-tokens 8192, 1k prompts, 128
# out, concurrency 1, 64 and 256), now with decode graphs sized for the context
# (graph_table_width) and the device's view of each step (idle / prepare / run) in the phase
# table. Prediction in bench/NOTES.md ("Graph-replayed decode steps sized for the context").
# Carry build-gpu/pack.
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
OUT=/tmp/serve IN=1024 OUTLEN=128 N1=16 N64=256 CONCURRENCY="1 64 256" timeout 560 bash scripts/gpu_serve_check.sh \
  $P/client/flashserve_bench \
  bf16=$P/server/flashserve_server,--num-blocks,32768,--max-num-seqs,256,--max-batched-tokens,8192 2>&1 |
  tee "$out/serve.log" | tail -12
cp /tmp/serve/*.json /tmp/serve/*.metrics "$out/" 2>/dev/null
