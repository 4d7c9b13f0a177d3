#!/usr/bin/env bash
# Session 55 call 1 (issue 22), carry build-s55p (bench/build_pack.sh build-s55a build-s55p),
# ~6 min: the candidate v4.40, the zigzag static walk in every ws instance (its SASS that of
# session 54's zz/ variant, md5) and captured causal rows of one length on the persistent static
# walk at every head dim (FLASHSERVE_PREFILL_WS_ZIGZAG=0: v4.39's rule and round robin, for A/B).
# 1. test_prefill_cuda and test_fp8_cuda whole (CapturedCalls: the full grid's zigzag, the
#    ZIGZAG=0 round, the 3-SM grid);
# 2. captured calls (GRAPH=1), 4 passes, paired against the eager call (the dynamic walk, which
#    the change leaves alone): the candidate's rule (graph) and v4.39's (old). Rows: d 64 16x1k
#    and 4x4k causal, d 128 16x1k, 4x4k, 8x2k, 1x16k causal, d 64 4x4k non-causal (a control).
#    Prediction: graph's d 128 16x1k causal within ~5% of eager (old: -19%), 4x4k and 8x2k within
#    ~3% (-8%, -10%), 1x16k level; d 64 causal +0..+3% over old; the control level.
# 3. racecheck and synccheck of the ws kernels over CapturedCalls (the zigzag walk's hand-over).
B=${B:-build-s55a}
[ -d "$B" ] || tar xJf build-s55p/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 200
suite $B/test_fp8_cuda 100
go 400 && { ab zig 4 18,16,1,3,21,5,15 graph=GRAPH=1 old=GRAPH=1,FLASHSERVE_PREFILL_WS_ZIGZAG=0 > /dev/null
  python3 bench/ab_paired.py "$out/ab_zig.log" 2>&1 | tail -12; }
go 470 && SAN_KERNELS=prefill_sm90_ws sanitize racecheck 60 $B/test_prefill_cuda PrefillCuda.CapturedCalls race_cap
go 530 && SAN_KERNELS=prefill_sm90_ws sanitize synccheck 50 $B/test_prefill_cuda PrefillCuda.CapturedCalls sync_cap
pack_out
