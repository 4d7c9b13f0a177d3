#!/usr/bin/env bash
# Session 20 call 3: v4.12 as committed (build-g20f, the library byte for byte call 1's F and
# call 2's bench build): tests, compute-sanitizer memcheck / racecheck / synccheck on five grid
# cases (packed and paged, with the 3-CTA persistent runs), and a repeat A/B against main.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
F=build-g20f
timeout 120 $F/tests/test_prefill_cuda --gtest_brief=1 > /tmp/w/test_f.log 2>&1; echo "F prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_f.log | tr '\n' ' ')"
grep -E "Failure|FAILED" /tmp/w/test_f.log | head -4
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in memcheck racecheck synccheck; do
  timeout 70 /usr/local/cuda/bin/compute-sanitizer --tool $tool $F/tests/test_prefill_cuda --gtest_filter="$cases" > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_$tool.log | tr '\n' ' ')"
done
timeout 150 python3 bench/ab_prefill.py --lib $F/libflashserve_c.so --config main=@build-g19L/libflashserve_c.so 2>&1 | tee $out/ab_f_main.log
cd /tmp/w && tar cJf $out/call3_logs.tar.xz *.log
