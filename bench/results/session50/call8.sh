#!/usr/bin/env bash
# Session 50 call 8 (issue 22), carry build-l2h (as call 7): the causal section's budget beside the
# L2 hints, 8 passes: 32 MB (v4.35's) against 16 and 8 MB on the short and long causal rows (call
# 7: 8 MB with the hints +1.0..+4.9% short, -0.8..+2.0% long, 5 passes; call 6 without them 16 MB
# +1.6..+4.6% short; call 1 16 MB +0.7..+2.0% long).
B=build-l2h
source bench/results/call_prologue.sh
set +e
ab budget 8 18,1,16,3,21,42,8,5,10,13,37,6,49 mb16=FLASHSERVE_PREFILL_WS_L2_MB=16 mb8=FLASHSERVE_PREFILL_WS_L2_MB=8
python3 bench/ab_paired.py "$out/ab_budget.log" 2>&1 | tail -15
pack_out
