#!/usr/bin/env bash
# Session 42 call 4 (issue 22), carry build-s42c (call 3's): memcheck and racecheck over the
# skewed batches (their 200-, 300-, 500- and 170-sequence cases take the new walk or its
# fallback), the ws kernels instrumented; then ab 12 passes against v4.32 on call 3's noisy rows.
B=build-s42c
source bench/results/call_prologue.sh
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 150 $B/test_prefill_cuda PrefillCuda.SkewedVarlenBatches memcheck
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 150 $B/test_prefill_cuda PrefillCuda.SkewedVarlenBatches racecheck
ab vl2 12 d128-many-c,d128-many,d128-skew,d128-skew-c,d128-mix-c-p16,d64-16x1k-c,d64-4x4k-c v432=@$B/v432/libflashserve_c.so
