#!/usr/bin/env bash
# Session 18 call 2 (untracked): branch pieces A (slot fix + paged dynamic), AB (+ offsets in smem), b3 (+ two Q buffers), poly exp 2/8 and 3/8.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
for spec in "gA:" "gA:FLASHSERVE_PREFILL_WS_PERSISTENT=1" "gp3:"; do
  d=build-${spec%%:*}; e=${spec#*:}; n=t_${spec%%:*}${e//[^A-Z1]/}
  env $e $d/tests/test_prefill_cuda --gtest_brief=1 > $out/$n.log 2>&1; echo "$d [$e] rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/$n.log | tr '\n' ' ')"
done
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for e in "" FLASHSERVE_PREFILL_WS_PERSISTENT=1; do
  n=race_gA${e//[^A-Z1]/}
  env $e timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool racecheck build-gA/tests/test_prefill_cuda --gtest_filter="$cases" > $out/$n.log 2>&1
  echo "racecheck gA [$e] rc $? $(grep -E 'RACECHECK SUMMARY' $out/$n.log | tail -1)"
done
python3 bench/ab_prefill.py --lib build-m/libflashserve_c.so --only ${ROWS:-0,1,2,3,4,5,6,11,12,14,15,16,17,8,9,10} \
  --config A=@build-gA/libflashserve_c.so --config AB=@build-gAB/libflashserve_c.so --config ABC=@build-gb3/libflashserve_c.so \
  --config p2=@build-gp2/libflashserve_c.so --config p3=@build-gp3/libflashserve_c.so \
  --config A_p1=@build-gA/libflashserve_c.so,FLASHSERVE_PREFILL_WS_PERSISTENT=1 2>&1 | tee $out/ab.log
