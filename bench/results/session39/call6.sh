#!/usr/bin/env bash
# Session 39's sixth call (issue 22: where pages lose against packed, after call 5 showed the
# producer's spills are not it). build-s39e/: v4.28's library with its d 128 bf16 ws objects and
# prefill_cuda.cu traced (FLASHSERVE_PREFILL_TRACE); traces of packed and 16-token-page rows side
# by side (4x4k, 1x16k causal: the 176-key tile; 4x4k causal: the 128-key tile). No prediction:
# a diagnosis for the next session.
B=build-s39e
source bench/results/call_prologue.sh
timeout 120 python3 bench/trace_prefill.py --lib $B/libflashserve_c.so \
  --only d128-4x4k,d128-4x4k-p16,d128-1x16k-c,d128-1x16k-c-p16,d128-4x4k-c,d128-4x4k-c-p16 > "$out/trace_paged.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace_paged.log"
