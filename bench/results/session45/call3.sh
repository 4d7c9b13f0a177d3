#!/usr/bin/env bash
# Session 45 call 3 (issue 22), carry build-s45a (prep2.sh; the tree's ws SASS since, md5):
# 1. racecheck over BigPages (call 2's 70 s ran out on the H100), 170 s.
# 2. d 64's 128-row tile (FLASHSERVE_PREFILL_WS_BLOCK_M=128) on non-causal rows of short
#    sequences, 6 passes, for a rule: 192-row tiles pad 1k queries to 1152 rows (+12.5%), 2k to
#    2112 (+3%), 512 to 576 (+12.5%), 300 to 384 (as 128's 384). Prediction: 16x1k +4.7% (calls 1
#    and 2), 32x512 +3-5%, 8x2k -3..-6%, 64x300 level or worse, the skew (an 8k prompt among 63
#    short ones) -5..-8% (its long prompt's work).
B=build-s45a
source bench/results/call_prologue.sh
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 170 $B/test_prefill_cuda PrefillCuda.BigPages racecheck
ab d64m128 6 d64-16x1k,d64-8x2k,d64-32x512,d64-64x300,d64-skew,d64-16x1k-p16 m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128
pack_out
