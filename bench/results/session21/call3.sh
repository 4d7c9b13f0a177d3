#!/usr/bin/env bash
# Session 21 call 3: racecheck of v4.13 (build-g21a; call 2's ran past its limit with the page
# sizes test in it): the grid cases, then the page sizes 1..256 (the 176-key row-gather runs) on
# their own. Then the paged rows by TMA page boxes (FLASHSERVE_PREFILL_WS_PAGED=tma: 16-token
# pages take 176-key tiles, 64-token pages 128) beside the row gather, one CTA an item and on the
# dynamic walk, with their packed rows: how much of the paged tile's cost is the gather's issue
# slots (call 2's ncu: the consumers run the same instructions; the producer adds 71M).
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
A=build-g21a
timeout 100 python3 bench/ab_prefill.py --lib $A/libflashserve_c.so --only 13,11,12,3,6,14,2,22 \
  --config tma=FLASHSERVE_PREFILL_WS_PAGED=tma --config p1=FLASHSERVE_PREFILL_WS_PERSISTENT=1 \
  --config tmap1=FLASHSERVE_PREFILL_WS_PAGED=tma,FLASHSERVE_PREFILL_WS_PERSISTENT=1 2>&1 | tee $out/ab_tma.log
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $A/tests/test_prefill_cuda --gtest_filter="$cases" > /tmp/w/san_racecheck_grid.log 2>&1
echo "racecheck grid: rc $? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/w/san_racecheck_grid.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_racecheck_grid.log | tr '\n' ' ')"
timeout 300 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $A/tests/test_prefill_cuda --gtest_filter=PrefillCuda.PageSizesOneTo256 > /tmp/w/san_racecheck_pages.log 2>&1
echo "racecheck pages: rc $? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY' /tmp/w/san_racecheck_pages.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_racecheck_pages.log | tr '\n' ' ')"
cd /tmp/w && tar cJf $out/call3_logs.tar.xz *.log
