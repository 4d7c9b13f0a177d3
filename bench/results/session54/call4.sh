#!/usr/bin/env bash
# Session 54 call 4 (issue 22; written, not run: the device's starts were refused), carry
# build-s54p (prep4.sh), ~7 min: the zigzag static walk's build (zz/) run and timed.
# 1. zz/test_prefill_cuda and zz/test_fp8_cuda whole: the grid's static persistent runs
#    (SCHED=static on 1- and 3-SM grids), CapturedCalls' second round (a 3-SM grid, PERSISTENT=1)
#    and the FP8 cases' static walk on a 3-SM grid take the zigzag order on causal rows of one
#    length (on the full grid these small calls do not walk: no zigzag);
# 2. captured calls (GRAPH=1), 4 passes, paired against the tree's eager call: the tree's rule
#    (d 64's short tiles: the round robin static walk; d 128: one CTA an item), zz's (d 64: the
#    zigzag), and on a persistent grid (PERSISTENT=1: d 128's causal rows by the static walk)
#    the tree's round robin against zz's zigzag. Rows: d 64 16x1k and 4x4k causal, d 128 16x1k,
#    4x4k, 8x2k, 1x16k causal, d 64 4x4k non-causal (a control: no zigzag without a mask).
#    Prediction: zz's d 128 16x1k causal within ~5% of eager (the tree's rule -19%), 4x4k and
#    8x2k within ~3% (-8%, -10%), 1x16k level; d 64 +0..+3% over the round robin; the control level.
B=${B:-build-s54z}
[ -d "$B" ] || tar xJf build-s54p/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/zz/test_prefill_cuda 200 test_prefill_cuda_zz
suite $B/zz/test_fp8_cuda 100 test_fp8_cuda_zz
# the tree's build (its kernels v4.39's) under the session's new cases: CapturedCalls' 3-SM round,
# the FP8 cases' static walk
suite $B/test_prefill_cuda 100 test_prefill_cuda_tree PrefillCuda.CapturedCalls
suite $B/test_fp8_cuda 100 test_fp8_cuda_tree
Z=$B/zz/libflashserve_c.so
go 420 && { ab zig 4 18,16,1,3,21,5,15 graph=GRAPH=1 zig=@$Z,GRAPH=1 rrp=GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=1 \
  zigp=@$Z,GRAPH=1,FLASHSERVE_PREFILL_WS_PERSISTENT=1 > /dev/null
  python3 bench/ab_paired.py "$out/ab_zig.log" 2>&1 | tail -10; }
pack_out
