#!/usr/bin/env bash
# Session 55 call 1 (issue 22), carry build-s55p (bench/results/session55/prep1.sh),
# ~9 min: the candidate v4.40, captured calls (no counters) on the persistent static walk at
# every head dim, causal rows by zigzag units: WsWorkOrder's zigzag over rows of one length
# (session 54's, its SASS then md5-equal to the zz/ variant's), WsVarlenOrder's zigzag where the
# q lengths differ (session 55); FLASHSERVE_PREFILL_WS_ZIGZAG=0 gives v4.39's rule and round robin.
# 1. test_prefill_cuda and test_fp8_cuda whole (CapturedCalls: the full grid's zigzag, ragged and
#    not, the ZIGZAG=0 round, the 3-SM grid);
# 2. captured calls (GRAPH=1), 4 passes, paired against the eager call (the dynamic walk, which
#    the change leaves alone): the candidate (graph) and v4.39's rule (old). Rows: d 64 16x1k and
#    4x4k causal, d 128 16x1k, 4x4k, 8x2k, 1x16k causal, d 64 4x4k non-causal (a control); then
#    the varlen rows: d 128 skew causal packed and in 16-token pages, d 64 skew causal, the mix
#    in 16-token pages, 200 short prompts causal.
#    (AB_SECS=N bounds the timing run; its rows in the order of the --only list.)
#    Prediction: graph's d 128 16x1k causal within ~5% of eager (old: -19%), 4x4k and 8x2k within
#    ~3% (-8%, -10%), 1x16k level; d 64 causal +0..+3% over old; the control level; the skew +4-6%
#    over old (11% -> 5% above the mean on paper), the mix +3-7%, 200 prompts level..+1%.
# 3. racecheck of the ws kernels over CapturedCalls (the zigzag walks' hand-over).
B=${B:-build-s55a}
[ -d "$B" ] || tar xJf build-s55p/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 200
suite $B/test_fp8_cuda 100
# One ab_prefill run over the rows in order of the question's weight, as long as the call allows
# (a row's passes together: a cut leaves whole rows); AB_SECS its seconds (default 330).
timeout ${AB_SECS:-330} python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes 4 \
  --only 1,24,25,3,21,28,18,5,16,27,34,15 --config graph=GRAPH=1 --config old=GRAPH=1,FLASHSERVE_PREFILL_WS_ZIGZAG=0 \
  > "$out/ab_zig.log" 2>&1
echo "$(el) ab zig rc $?"
python3 bench/ab_paired.py "$out/ab_zig.log" 2>&1 | tail -14
go 530 && SAN_KERNELS=prefill_sm90_ws sanitize racecheck 55 $B/test_prefill_cuda PrefillCuda.CapturedCalls race_cap
pack_out
