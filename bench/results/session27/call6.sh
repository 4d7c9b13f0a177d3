#!/usr/bin/env bash
# Session 27 call 6 (issue 27), optional: mixed steps on the GPU server, the run bench/NOTES.md
# ("Mixed steps") asks for: concurrency 64, 1k prompts (± half), 128 out, a fresh server a
# setting (no budget, --max-prefill-tokens 512 and 2048, a TPOT target of 8 ms), TTFT / TPOT /
# ITL / output tok/s and the fitted step cost model each (bench/mixed_steps.sh). Carry
# build-gpu/pack.
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
command -v curl >/dev/null || echo "no curl here: the budgets' and cost model's columns will read nan"
DEVICE=cuda MODEL=synthetic:llama3-8b CONCURRENCY=64 NUM_PROMPTS=256 INPUT_LEN=1024 OUTPUT_LEN=128 MAX_BATCHED=8192 \
  timeout 570 bash bench/mixed_steps.sh "$P" "$out/mixed" default --max-prefill-tokens,512 \
  --max-prefill-tokens,2048 --tpot-target-ms,8 2>&1 | tee "$out/mixed.log" | tail -6
echo "$(el) done"
