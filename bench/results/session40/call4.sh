#!/usr/bin/env bash
# Session 40's fourth call (issue 22), carry build-s40c (prep4.sh): the mask by immediates (every
# prefill and decode kernel's masked tiles: logits_row compares each element's constant offset
# with the bounds moved to the lane's first key, the lower bound only where a row of the warp
# starts inside the tile) with the three GPU suites; ab against v4.29 (base) on the rows with
# masked tiles and two without, and fd64 (d 64's item view by multiply-highs) beside, 8 passes;
# decode against v4.29 (bench_decode --quick, same process).
# Prediction (before the run): d 64's masked tile 747 -> ~600 instructions a warp (SASS), 16x1k
# causal +2-4% at d 64, +1-3% at d 128, 4x4k causal +0.5-1.5%, 1x16k causal and the non-causal
# rows level; fd64 +0.5-1.5% on d 64's short rows; decode level.
B=build-s40c
source bench/results/call_prologue.sh
for t in test_prefill_cuda test_fp8_cuda test_decode_cuda; do suite $B/$t; done
ROWS=d64-16x1k-c,d64-4x4k-c,d64-skew-c,d64-1x16k-c,d64-16x1k-c-p16,d64-16x1k,d128-16x1k-c,d128-4x4k-c,d128-8x2k-c
ROWS=$ROWS,d128-skew-c,d128-1x16k-c,d128-4x4k-c-p16,d128-1x2k+30k-c-p16,d128-1x2k+30k-c-p16-e4m3,d128-16x1k,d256-1x16k-c
timeout 200 python3 bench/ab_prefill.py --lib $B/base/libflashserve_c.so --passes 8 --only $ROWS \
  --config mask=@$B/libflashserve_c.so --config fd64=@$B/fd64/libflashserve_c.so > "$out/ab_mask.log" 2>&1
echo "$(el) ab mask rc $?"; cat "$out/ab_mask.log"
timeout 200 python3 bench/bench_decode.py --quick --no-flex --lib $B/libflashserve_c.so \
  --variant base=$B/base/libflashserve_c.so > "$out/decode.log" 2>&1
echo "$(el) decode rc $?"; tail -40 "$out/decode.log"
pack_out
