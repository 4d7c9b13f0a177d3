#!/usr/bin/env bash
# Session 58, call 2 (issue 22), carry build-s58q, ~7 min, right after call 1 (warm): racecheck
# over CapturedStaticWalk (the captured static walk on a 3-SM grid, 32 launches; the ws kernels
# alone instrumented, 150 s at most; CapturedCalls did not finish in 300 s), then
# session57/call6.sh in the time left (the serial loop at d 128: its tests, A/B against nohalf
# and the default).
[ -d build-s58b ] || tar xJf build-s58q/b.tar.xz
B=build-s58b
source bench/results/call_prologue.sh
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 150 $B/test_prefill_cuda 'PrefillCuda.CapturedStaticWalk' race_static
B=build-s58b DL=$(( 585 - $(date +%s) + t0 )) bash bench/results/session57/call6.sh
