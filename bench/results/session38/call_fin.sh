#!/usr/bin/env bash
# Session 38's last call: the library as it lands (prefill v4.26, the decode without the
# persistent kernel: every ws and decode object's SASS as measured in calls 3-6, md5), its three
# CUDA suites whole, and v4.26 traced (the item boundary after the fast division: call 3's ndec
# was 0.65-0.68 us). build-fin/: build-gpu's library and tests, build-var/trace's library.
B=build-fin
source bench/results/call_prologue.sh
for t in test_prefill_cuda test_fp8_cuda test_decode_cuda; do
  timeout 170 "$B/$t" --gtest_brief=1 > "$out/$t.log" 2>&1
  echo "$(el) $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/$t.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/$t.log" | head -6
done
timeout 100 python3 bench/trace_prefill.py --lib $B/trace/libflashserve_c.so --only 0,1,3,4 > "$out/trace.log" 2>&1
echo "$(el) trace rc $?"; cat "$out/trace.log"
pack_out
