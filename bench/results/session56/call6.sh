#!/usr/bin/env bash
# Session 56 call 6 (issue 22), carry build-s56q (bench/build_pack.sh build-s56b build-s56q: the
# tree with FLASHSERVE_PREFILL_WS_CAPTURED_SCHED, captured launches on counters of the graph's own,
# bench-only, off), ~2.5 min: its tests (CapturedCalls' six rounds, CapturedCallsOwnTheirCounters),
# then captured calls by the dynamic walk on those counters (ctr) against v4.40's zigzag static
# walk (graph), paired against the eager call, 4 passes; racecheck over CapturedCalls with what
# time is left. Prediction: ctr level with eager (within 2%: the same walk, one graph node), graph
# as call 4 (-3..-7%).
B=${B:-build-s56b}
[ -d "$B" ] || tar xJf build-s56q/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 100 captured '*Captured*'
timeout 45 python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes 4 \
  --only 1,25,21,24,28,18 --config graph=GRAPH=1 --config ctr=GRAPH=1,FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=1 \
  > "$out/ab_ctr.log" 2>&1
echo "$(el) ab ctr rc $?"
python3 bench/ab_paired.py "$out/ab_ctr.log" 2>&1 | tail -8
left=$(( ${DL:-150} - $(date +%s) + t0 - 5 ))
[ $left -gt 20 ] && SAN_KERNELS=prefill_sm90_ws sanitize racecheck $left $B/test_prefill_cuda PrefillCuda.CapturedCalls race_cap
