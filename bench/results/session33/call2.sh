#!/usr/bin/env bash
# Session 33 call 2 (issue 22): which part of call 1's lean build pays at d 128's short rows.
# Variants of the d 64 / d 128 bf16 instances with -DFLASHSERVE_PREFILL_WS_LEAN=M compiled out
# (1 pages: the producer's TMA-page and gather paths and so the fenced walk; 2 the fenced walk
# only; 4 the A/B switches only; 7 all), on v4.21 (the default library) and on v4.20 (main's
# kernel: v420lean1, v420lean7), against v4.21 and v4.20, packed rows only, 5 passes.
# Issue 25: trace_decode.py's FP8 timeline again (call 1's fault: the timeline passed the FP8
# pool as a temporary, freed before the calls; bench_decode.ours now keeps it).
# Carry build-call2/.
B=build-call2
source bench/results/call_prologue.sh
cfg=()
for v in v420 lean1 lean2 lean4 lean7 v420lean1 v420lean7; do cfg+=(--config "$v=@$B/$v/libflashserve_c.so"); done
timeout 300 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 \
  --only 0,1,2,3,4,5,8,13,15,16,17,20,21,24,26,27 "${cfg[@]}" > "$out/ab_lean.log" 2>&1
echo "$(el) ab rc $?"; tail -2 "$out/ab_lean.log"
timeout 60 python3 bench/trace_decode.py --lib $B/v420/libflashserve_c.so --shape 1,32768 --shape 64,8192 \
  --timeline --fp8 e4m3 > "$out/timeline.log" 2>&1
echo "$(el) timeline rc $?"; grep timeline "$out/timeline.log"
pack_out
