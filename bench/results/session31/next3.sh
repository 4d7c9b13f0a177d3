#!/usr/bin/env bash
# Next session's third call (issue 27), written in session 31: the server's CUDA defaults. With
# --device cuda the server steps at most --max-batched-tokens 256 tokens (the CPU's default) and
# no prefill budget; every GPU table so far ran --max-batched-tokens 8192, and session 30 found
# --max-prefill-tokens 2048 keeps the output at concurrency 64/256 while cutting TTFT and ITL p99
# 3.5x. The defaults as they are against 8192 + 2048 (a candidate for the CUDA defaults) at
# concurrency 1, 64 and 256, 1k in / 128 out. On an H200 if one comes (the figures).
# Carry build-gpu/pack (made by scripts/gpu_pack.sh, README of session 30).
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
srv=$P/server/flashserve_server,--max-num-seqs,256
OUT=/tmp/serve IN=1024 OUTLEN=128 N64=128 CONCURRENCY="1 64 256" timeout ${LIMIT:-540} bash scripts/gpu_serve_check.sh \
  $P/client/flashserve_bench defaults=$srv b8192p2048=$srv,--max-batched-tokens,8192,--max-prefill-tokens,2048 \
  2>&1 | tee "$out/serve.log" | tail -24
tar czf "$out/serve_json.tgz" -C /tmp/serve . 2>/dev/null
echo "$(el) done"
