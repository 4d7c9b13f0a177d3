#!/usr/bin/env bash
# Session 22 call 1 (session 21's call5.sh, never run): v4.13 with the consumers' walk compiled
# twice, fenced for gathered stages and not for the others (build-g21d, wip/prefill-walk-twice
# ef2eccd), against main v4.12 (build-g20f) and v4.13 as committed in f31361e (build-g21a):
# tests, packed rows of both key tiles and the paged rows, three passes; racecheck and synccheck
# on the grid cases.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
D=build-g21d
timeout 150 $D/tests/test_prefill_cuda --gtest_brief=1 > /tmp/w/test_d.log 2>&1; echo "D prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_d.log | tr '\n' ' ')"
grep -E "Failure|FAILED|rror" /tmp/w/test_d.log | head -6
timeout 260 python3 bench/ab_prefill.py --lib $D/libflashserve_c.so --passes 3 --only 20,2,4,5,13,0,1,3,11,12,6,22,23,9,15 \
  --config main=@build-g20f/libflashserve_c.so --config a=@build-g21a/libflashserve_c.so 2>&1 | tee $out/ab_d.log
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in racecheck synccheck; do
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool $D/tests/test_prefill_cuda --gtest_filter="$cases" > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_$tool.log | tr '\n' ' ')"
done
cd /tmp/w && tar cJf $out/call1_logs.tar.xz *.log
