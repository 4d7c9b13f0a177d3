#!/usr/bin/env bash
# Session 41 call 9 (issue 22), carry build-s41e (prep9.sh): idle (FLASHSERVE_PREFILL_WS_IDLE_WG=1,
# every d 64 and d 128 16-bit ws instance: a consumer warpgroup without rows in an item issues
# nothing, keeping its waits, releases and ping-pong slots) with its test_prefill_cuda whole, ab
# against v4.32, 8 passes, then synccheck over SkewedVarlenBatches (sequences of 1-40
# queries: idle warpgroups in most items), the ws kernels instrumented.
# Prediction (before the run): 200 short prompts (64-511 queries; half the sequences end in a q
# tile of 64 rows or fewer) +3-8%, the skewed batch and the mix +0.5-2%, full-tile rows (16x1k,
# 4x4k, 1x16k) level.
B=build-s41e
source bench/results/call_prologue.sh
suite $B/idle/test_prefill_cuda 240 test_prefill_idle
ROWS=d128-many-c,d128-many,d128-skew-c,d128-skew,d128-mix-c-p16,d128-skew-c-p16,d64-skew-c
ROWS=$ROWS,d128-16x1k-c,d128-4x4k-c,d64-16x1k-c,d64-4x4k,d128-1x16k-c
ab idle 8 $ROWS idle=@$B/idle/libflashserve_c.so
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 $B/idle/test_prefill_cuda "PrefillCuda.SkewedVarlenBatches"
