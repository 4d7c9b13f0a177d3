#!/usr/bin/env bash
# Session 19 call 3: E4 (E3 + the packed dynamic walk's claim an item ahead), E5 (E4 + two Q
# buffers where they fit): tests, sanitizers on E5, A/B against E3 and main. <= 8 files back.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
for b in d e; do
  build-g19$b/tests/test_prefill_cuda --gtest_brief=1 > /tmp/w/test_$b.log 2>&1; echo "e-$b prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_$b.log | tr '\n' ' ')"
  grep -E "Failure|FAILED" /tmp/w/test_$b.log | head -4
done
timeout 330 python3 bench/ab_prefill.py --lib build-g19e/libflashserve_c.so --config main=@build-g19/libflashserve_c.so \
  --config e3=@build-g19c/libflashserve_c.so --config e4=@build-g19d/libflashserve_c.so 2>&1 | tee $out/ab_e45.log
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for spec in racecheck:e synccheck:e memcheck:e racecheck:d; do
  tool=${spec%%:*}; b=${spec#*:}
  timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool $tool build-g19$b/tests/test_prefill_cuda --gtest_filter="$cases" > /tmp/w/san_${tool}_$b.log 2>&1
  echo "$tool e-$b: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_${tool}_$b.log | tail -1)"
done
cd /tmp/w && tar cJf $out/call3_logs.tar.xz *.log
