#!/usr/bin/env bash
# Session 56 call 4 (issue 22), carry build-s55p (the candidate v4.40, session55/prep1.sh's
# library built with -DFLASHSERVE_PREFILL_WS_ZIGZAG=1 over every CUDA source), ~4 min: memcheck
# and synccheck of the ws kernels over PrefillCuda.CapturedCalls (call 1 ran racecheck), then
# captured calls again, 8 passes, on d 64's causal rows (call 1: 16x1k the one row where the
# zigzag read below the round robin, -5.0% against -2.9% of eager, 4 passes) and d 128's 16x1k
# and 8x2k causal: candidate (graph) against v4.39's rule (old), paired against the eager call.
# Prediction: d 64 16x1k within +-3% of old (the zigzag's gain there is small on paper: 2 CTAs an
# SM), the rest as call 1.
B=${B:-build-s55a}
[ -d "$B" ] || tar xJf build-s55p/b.tar.xz
source bench/results/call_prologue.sh
set +e
SAN_KERNELS=prefill_sm90_ws sanitize memcheck 120 $B/test_prefill_cuda PrefillCuda.CapturedCalls mem_cap
SAN_KERNELS=prefill_sm90_ws sanitize synccheck 90 $B/test_prefill_cuda PrefillCuda.CapturedCalls sync_cap
timeout 120 python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes 8 \
  --only 18,16,27,8,32,1,21 --config graph=GRAPH=1 --config old=GRAPH=1,FLASHSERVE_PREFILL_WS_ZIGZAG=0 \
  > "$out/ab_zig8.log" 2>&1
echo "$(el) ab zig8 rc $?"
python3 bench/ab_paired.py "$out/ab_zig8.log" 2>&1 | tail -9
pack_out
