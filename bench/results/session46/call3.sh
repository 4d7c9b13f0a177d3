#!/usr/bin/env bash
# Session 46 call 3 (issue 22), carry build-s45c/libflashserve_c.so (the tree, v4.34): call 2's
# table read d 128's 128-key tile above the rule's 176 on 4x4k non-causal (653 against 608) and the
# skew non-causal (609 / 586), the wide tile's rule (ws_alt_tile) being from session 18, before
# the packed 128-key tile's third stage (v4.29) and half tile (v4.32). Both key tiles forced
# against the rule on d 128's rows, 10 passes; d 64's row tiles forced on its causal rows, 8.
B=build-s45c
source bench/results/call_prologue.sh
R128=d128-4x4k,d128-8x2k,d128-1x16k,d128-skew,d128-4x4k-p16,d128-1x16k-c,d128-1x2k+30k-c,d128-1x16k-c-p16,d128-4x4k-c,d128-8x2k-c,d128-skew-c,d128-16x1k
ab tile128 10 $R128 n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 n176=FLASHSERVE_PREFILL_WS_BLOCK_N=176
ab tile64 8 d64-4x4k-c,d64-1x16k-c,d64-skew-c,d64-16x1k-c,d64-4x4k,d64-1x16k m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128 m192=FLASHSERVE_PREFILL_WS_BLOCK_M=192
pack_out
