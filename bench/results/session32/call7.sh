#!/usr/bin/env bash
# Session 32 call 7 (issue 22): the candidate for main, v4.20 less the block boundary with the
# plain run at d 64 only (d 128's SASS as v4.18's: the one loop, 2606 instructions against
# 2619), against v4.18 built with build-gpu's flags (v418g: is build-v418's HD256=OFF build
# the 2-5% on the long d 128 rows of calls 3 and 5?), build-v418's library, and nobound (the
# plain run at every head dim). The GPU prefill grid and skewed batches first.
# Carry build-call7/.
B=build-call7
source bench/results/call_prologue.sh
T=$B/tests/test_prefill_cuda
timeout 90 $T --gtest_brief=1 --gtest_filter='Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches' > "$out/test_prefill.log" 2>&1
echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_prefill.log" | head -6
timeout 300 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 \
  --only 0,1,2,3,4,5,6,8,9,10,11,12,13,14,15,16,17,19,20,21,22,23,24,25,26,27,28 \
  --config v418g=@$B/v418g/libflashserve_c.so --config v418=@$B/v418/libflashserve_c.so \
  --config nobound=@$B/nobound/libflashserve_c.so > "$out/ab_final.log" 2>&1
echo "$(el) ab rc $?"; tail -2 "$out/ab_final.log"
