#!/usr/bin/env bash
# Session 40's fifth call (issue 22), carry build-s40d (prep5.sh): the library as it lands, prefill
# v4.30 (call 4's mask by immediates, and d 64's item view by multiply-highs in every d 64
# instance: its bf16 no-transform objects are call 4's fd64, md5; the fp16 and transform ones
# new), its test_prefill_cuda whole; synccheck over MaskOptions (the windows: the vote's
# two-bounds path) and grid cases 9 and 22 (the ws kernels instrumented).
B=build-s40d
source bench/results/call_prologue.sh
suite $B/test_prefill_cuda
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 120 $B/test_prefill_cuda \
  'PrefillCuda.MaskOptions:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/9:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/22'
pack_out
