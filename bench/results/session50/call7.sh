#!/usr/bin/env bash
# Session 50 call 7 (issue 22), carry build-l2h (bench/variant_lib.sh l2h: the tree's prefill
# v4.36 candidate, the loads' L2 policies, in prefill_cuda.cu and the bf16 ws instances; its
# test_prefill_cuda): K and V by TMA with evict_last, Q evict_first (FLASHSERVE_PREFILL_WS_L2_HINTS,
# default 3; 0 = evict_normal, as before), and the causal section's budget of 8 MB beside it.
# Calls 5-6: our DRAM bytes 1.5-2.1x the compulsory 258 MB on the causal rows where FA3's (which
# loads K and V evict_last) are 1.0x; 8 MB sections +2.0..+5.5% on the short causal rows.
# Prediction: hints +2-5% on the short causal rows, +0-2% long causal, non-causal level; mb8 on
# top of the hints less than alone.
B=build-l2h
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 120 test_prefill_cuda 'Gpu/PrefillCudaGrid.*:PrefillCuda.*'
ab short 6 18,1,16,3,21,0,7,2,15,24,27,34,35,42 h0=FLASHSERVE_PREFILL_WS_L2_HINTS=0 h1=FLASHSERVE_PREFILL_WS_L2_HINTS=1 \
  mb8=FLASHSERVE_PREFILL_WS_L2_MB=8 h0mb8=FLASHSERVE_PREFILL_WS_L2_HINTS=0,FLASHSERVE_PREFILL_WS_L2_MB=8
python3 bench/ab_paired.py "$out/ab_short.log" 2>&1 | tail -16
ab long 5 8,5,10,17,4,9,13,11,37,6 h0=FLASHSERVE_PREFILL_WS_L2_HINTS=0 h1=FLASHSERVE_PREFILL_WS_L2_HINTS=1 \
  mb8=FLASHSERVE_PREFILL_WS_L2_MB=8 h0mb8=FLASHSERVE_PREFILL_WS_L2_HINTS=0,FLASHSERVE_PREFILL_WS_L2_MB=8
python3 bench/ab_paired.py "$out/ab_long.log" 2>&1 | tail -12
pack_out
