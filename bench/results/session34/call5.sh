#!/usr/bin/env bash
# Session 34 call 5 (issue 25): e5m2 pools by the register path (WsKv::kFp8RegPages, its SASS the
# same as call 1's fp8reg88), e4m3 by the copy path (its SASS moved by the shared store code the
# two paths now share). The build's test_fp8_cuda and test_prefill_cuda (grid, skewed, pages);
# ab rows 11, 29-31 against the session's first library (old/: main at 8b017e4), 5 passes.
B=build-call5
source bench/results/call_prologue.sh
timeout 60 $B/tests/test_fp8_cuda --gtest_brief=1 > "$out/test_fp8.log" 2>&1
echo "$(el) test_fp8_cuda rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_fp8.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_fp8.log" | head -4
timeout 150 $B/tests/test_prefill_cuda --gtest_brief=1 > "$out/test_prefill.log" 2>&1
echo "$(el) test_prefill_cuda rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_prefill.log" | head -4
timeout 100 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 11,29,30,31 \
  --config old=@$B/old/libflashserve_c.so > "$out/ab_fp8.log" 2>&1
echo "$(el) ab rc $?"; grep -v again "$out/ab_fp8.log"
