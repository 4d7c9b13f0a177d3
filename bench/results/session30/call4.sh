#!/usr/bin/env bash
# Session 30 call 4 (issue 22): where an item's time goes in prefill v4.18 (a trace build,
# -DFLASHSERVE_PREFILL_TRACE=ON, build-trace/libflashserve_c.so; the default build's kernels have
# no stamps), on the short rows where the gap to the best peer is largest: d 128 16x1k (0, 1),
# 8x2k causal (21), d 64 16x1k (7, 18), and 1x16k causal (5) for the main loop's pace; the one-Q-slot
# walk (v4.17) beside, to see what the second slot moved.
# Carry build-trace/libflashserve_c.so.
source bench/results/call_prologue.sh
timeout ${LIMIT:-200} python3 bench/trace_prefill.py --lib build-trace/libflashserve_c.so --only 0,1,21,7,18,5 \
  --config q1=FLASHSERVE_PREFILL_WS_Q_SLOTS=1 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log" | tail -60
