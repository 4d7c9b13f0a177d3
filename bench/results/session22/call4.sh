#!/usr/bin/env bash
# Session 22 call 4: v4.15 (build-g22a) under compute-sanitizer, now that paged K/V walk
# dynamically by default: memcheck, synccheck and racecheck on the grid cases and on every page
# size 1-256 (PageSizesOneTo256: the row gather's default run).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
B=build-g22a
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in memcheck synccheck; do
  timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_prefill_cuda --gtest_filter="${cases}PrefillCuda.PageSizesOneTo256" > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY' /tmp/w/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_$tool.log | tr '\n' ' ')"
done
timeout 330 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $B/tests/test_prefill_cuda --gtest_filter="${cases}PrefillCuda.PageSizesOneTo256" > /tmp/w/san_racecheck.log 2>&1
echo "racecheck: rc $? $(grep -E 'RACECHECK SUMMARY' /tmp/w/san_racecheck.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_racecheck.log | tr '\n' ' ')"
cd /tmp/w && tar cJf $out/call4_logs.tar.xz *.log
