#!/usr/bin/env bash
# Session 53 call 5 (issue 22), carry build-s53w (prep4.sh: v4.39's build, byte for byte the
# tree's); run as `tar xJf build-s53w/b.tar.xz && bash bench/results/session53/call5.sh` (~2 min):
# test_fp8_cuda (the FP8 paged instances' walk code changed with v4.39), then memcheck over
# PrefillCuda.CapturedCalls (the static walk over WsVarlenOrder, packed and in 16-token pages,
# under capture), the ws kernels alone instrumented.
B=build-s53c
source bench/results/call_prologue.sh
set +e
suite $B/test_fp8_cuda 60 test_fp8_cuda
go 150 && SAN_KERNELS=prefill_sm90_ws sanitize memcheck 90 $B/test_prefill_cuda 'PrefillCuda.CapturedCalls' memcheck
pack_out
