#!/usr/bin/env bash
# Session 41 call 5 (issue 22), carry build-peers (v4.32, main): the key tile at d 128 again, now
# that the 128-key packed instances take the half tile. Call 4's table read ws_alt above ours on
# the causal skew (176 keys: 543 against 509) and on 4x4k and the non-causal skew (128 keys: 650 /
# 619 against 616 / 593), with spreads of 9-16%. ab, 8 passes, FLASHSERVE_PREFILL_WS_BLOCK_N forced.
# Prediction: within +-1.5% of the default everywhere (session 40 call 7: the tile rule held).
B=build-peers
source bench/results/call_prologue.sh
ab tile 8 d128-skew-c,d128-skew,d128-4x4k,d128-4x4k-c,d128-8x2k-c,d128-many-c n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 n176=FLASHSERVE_PREFILL_WS_BLOCK_N=176
