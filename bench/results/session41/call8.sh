#!/usr/bin/env bash
# Session 41 call 8 (issue 22), carry build-s41d (prep8.sh): kbox (FLASHSERVE_PREFILL_WS_PAGE_K_TMA=1:
# K by 16-row page boxes, V by the row gather, in the paged 16-bit instances of d 64 and d 128)
# with its test_prefill_cuda whole, then ab against v4.32, 8 passes, over paged rows (a packed
# control), then memcheck and racecheck over grid case 22 (d 128 bf16 causal, 16-token pages).
# Prediction (before the run): d 128 pages +0..+5% (half the gather's instructions off the SM; the
# TMA unit at ~22 boxes a tile, ~2000 cycles from the L2, inside a tile's ~2800), d 64 level to
# +3%; if the gather's issue slots were not the cost, level (or lower, for the boxes' latency).
B=build-s41d
source bench/results/call_prologue.sh
suite $B/kbox/test_prefill_cuda 240 test_prefill_kbox
ROWS=d128-4x4k-c-p16,d128-4x4k-p16,d128-1x16k-c-p16,d128-1x2k+30k-c-p16,d128-1x2k+30k-c-p64,d128-4x4k-c-p64
ROWS=$ROWS,d128-skew-c-p16,d128-mix-c-p16,d64-4x4k-c-p16,d64-16x1k-c-p16,d64-16x1k-p16,d128-4x4k-c
ab kbox 8 $ROWS kbox=@$B/kbox/libflashserve_c.so
G=Gpu/PrefillCudaGrid.MatchesReferenceAndCpu
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 80 $B/kbox/test_prefill_cuda "$G/22"
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 90 $B/kbox/test_prefill_cuda "$G/22" race22
