#!/usr/bin/env bash
# Session 41 call 3 (issue 22), carry build-s41c (prep3.sh): half128 (FLASHSERVE_PREFILL_WS_HALF_DIAG=1:
# the half diagonal in d 128's packed 128-key instances only; their SASS is call 2's half, md5,
# whose test_prefill_cuda passed 104/104) against main (v4.31's SASS), ab 10 passes over d 128's
# rows, the 176-key and paged rows as controls (their code is main's on both sides); then synccheck
# and racecheck over grid case 21 (d 128 bf16 causal packed), the ws kernels instrumented.
# Prediction (before the run, from call 2): 16x1k causal +1.5-2.5%, 8x2k causal and 200 short
# prompts causal +1-1.5%, 4x4k causal and skew causal +0-1%, non-causal 128-key rows (16x1k,
# 200 short prompts) level; controls level.
B=build-s41c
source bench/results/call_prologue.sh
ROWS=d128-16x1k,d128-16x1k-c,d128-4x4k-c,d128-8x2k-c,d128-skew-c,d128-many,d128-many-c
ROWS=$ROWS,d128-4x4k,d128-1x16k-c,d128-4x4k-c-p16
ab half128 10 $ROWS half128=@$B/half128/libflashserve_c.so
G=Gpu/PrefillCudaGrid.MatchesReferenceAndCpu
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 80 $B/half128/test_prefill_cuda "$G/21"
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 90 $B/half128/test_prefill_cuda "$G/21" race21
