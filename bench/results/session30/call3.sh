#!/usr/bin/env bash
# Session 30 call 3 (issue 27, mixed steps on the GPU): the server (synthetic Llama-3-8B, bf16, the
# pool sized from memory on an 80 GB card) at concurrency 64 and 256, 1k in / 128 out, with
# prefill budgets: none (8192 tokens a step), --max-prefill-tokens 512 and 2048, and a TPOT
# target of 12 ms (the budget from the fitted step cost). The NOTES' "Mixed steps" run for the GPU.
# Carry build-gpu/pack.
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
srv=$P/server/flashserve_server,--max-num-seqs,256,--max-batched-tokens,8192
OUT=/tmp/serve IN=1024 OUTLEN=128 N64=128 CONCURRENCY="64 256" timeout ${LIMIT:-400} bash scripts/gpu_serve_check.sh \
  $P/client/flashserve_bench default=$srv p512=$srv,--max-prefill-tokens,512 p2048=$srv,--max-prefill-tokens,2048 \
  tpot12=$srv,--tpot-target-ms,12 2>&1 | tee "$out/serve.log" | tail -24
tar czf "$out/serve_json.tgz" -C /tmp/serve . 2>/dev/null
echo "$(el) done"
