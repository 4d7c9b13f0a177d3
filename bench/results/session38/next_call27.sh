#!/usr/bin/env bash
# Issue 27's table on an H200 (prepared in session 38; the last was measured 2026-12-01, before
# the skinny GEMMs' default, the 8192 / 2048 CUDA step budget, the overlapped steps): the decode
# step (bench_model --quick --steps-only), then the server (synthetic:llama3-8b,
# --num-blocks 32768 --max-num-seqs 256, the CUDA defaults) under the bundled client, 1k in / 128
# out, at CONCURRENCY (default "1 16 64 256"). SERVER_ARGS adds flags (e.g. ,--overlap-steps for
# the second call). Carry build-gpu/pack (next_prep27.sh).
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
timeout 80 $P/bench/bench_model --quick --steps-only > "$out/steps.log" 2>&1; echo "$(el) steps rc $?"
grep -A8 "^batch" "$out/steps.log" | head -10
left=$(( ${LIMIT:-585} - ($(date +%s) - t0) ))
# BLOCKS: the K/V pool (the issue's 32768, 64 GiB, fits an H200; an H100's 80 GB takes 16384).
srv=$P/server/flashserve_server,--num-blocks,${BLOCKS:-32768},--max-num-seqs,256${SERVER_ARGS:-}
OUT=/tmp/serve IN=1024 OUTLEN=128 N1=16 N64=128 CONCURRENCY="${CONCURRENCY:-1 16 64 256}" timeout $left \
  bash scripts/gpu_serve_check.sh $P/client/flashserve_bench serve=$srv 2>&1 | tee "$out/serve.log" | tail -14
cp /tmp/serve/*.json "$out/" 2>/dev/null
echo "$(el) done"
pack_out
