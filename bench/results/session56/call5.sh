#!/usr/bin/env bash
# Session 56 call 5 (issue 22), carry build-s56p (bench/build_pack.sh build-s56a build-s56p: the
# tree's v4.40, its prefill kernels md5-equal to build-s55p's): racecheck of the ws kernels over
# PrefillCuda.CapturedCalls (call 1's ran out of its 55 s at the first
# rounds: its log has no summary; the prologue printed rc 0 for it, el's status, fixed now).
B=${B:-build-s56a}
[ -d "$B" ] || tar xJf build-s56p/b.tar.xz
source bench/results/call_prologue.sh
set +e
SAN_KERNELS=prefill_sm90_ws sanitize racecheck ${RACE_SECS:-400} $B/test_prefill_cuda PrefillCuda.CapturedCalls race_cap
tail -4 "$out/san_race_cap.log"
