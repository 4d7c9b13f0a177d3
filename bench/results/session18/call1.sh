#!/usr/bin/env bash
# Session 18 call 1 (untracked): main's GPU tests, the WIP branch's tests and sanitizers, A/B.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
M=build-gm B=build-gb
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
step=${1:-all}
if [[ $step == all || $step == test ]]; then
for t in prefill decode kv_storage model sampler; do
  $M/tests/test_${t}_cuda --gtest_brief=1 > $out/main_$t.log 2>&1; echo "main $t rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/main_$t.log | tr '\n' ' ')"
done
for t in test_c_abi test_c_abi_kv test_c_abi_fp8; do LD_LIBRARY_PATH=$M:$LD_LIBRARY_PATH $M/tests/$t > $out/main_$t.log 2>&1; echo "main $t rc $? $(tail -1 $out/main_$t.log)"; done
for t in test_cpu test_torch_gpu; do PYTHONPATH=python FLASHSERVE_LIB=$M/libflashserve_c.so timeout 200 python3 python/tests/$t.py > $out/py_$t.log 2>&1; echo "py $t rc $? $(tail -1 $out/py_$t.log)"; done
for e in "" FLASHSERVE_PREFILL_WS_PERSISTENT=1 "FLASHSERVE_PREFILL_WS_PERSISTENT=1 FLASHSERVE_PREFILL_WS_O_ASYNC=1" FLASHSERVE_PREFILL_WS_O_ASYNC=1; do
  n=br${e//[^A-Z1]/}; env $e $B/tests/test_prefill_cuda --gtest_brief=1 > $out/$n.log 2>&1; echo "branch [$e] rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/$n.log | tr '\n' ' ')"
done
fi
if [[ $step == all || $step == san ]]; then
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for spec in "racecheck:" "racecheck:FLASHSERVE_PREFILL_WS_PERSISTENT=1 FLASHSERVE_PREFILL_WS_O_ASYNC=1" "synccheck:FLASHSERVE_PREFILL_WS_PERSISTENT=1 FLASHSERVE_PREFILL_WS_O_ASYNC=1" "memcheck:FLASHSERVE_PREFILL_WS_PERSISTENT=1 FLASHSERVE_PREFILL_WS_O_ASYNC=1"; do
  tool=${spec%%:*}; e=${spec#*:}; n=san_${tool}${e//[^A-Z1]/}
  env $e timeout 200 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_prefill_cuda --gtest_filter="$cases" > $out/$n.log 2>&1
  echo "$tool [$e] rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $out/$n.log | tail -1)"
done
fi
if [[ $step == all || $step == ab ]]; then
python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --only ${ROWS:-0,1,2,3,4,5,6,11,12,18,8} \
  --config main=@$M/libflashserve_c.so --config b3=@build-gb3/libflashserve_c.so \
  --config p1=FLASHSERVE_PREFILL_WS_PERSISTENT=1 --config oa=FLASHSERVE_PREFILL_WS_O_ASYNC=1 \
  --config n128=FLASHSERVE_PREFILL_WS_BLOCK_N=128 2>&1 | tee $out/ab.log
fi
if [[ $step == all || $step == serve ]]; then
  LD_LIBRARY_PATH=$M/lib:$LD_LIBRARY_PATH timeout 240 bash tests/server_flags_test.sh $M/server/flashserve_server cuda > $out/flags.log 2>&1; echo "server_flags cuda rc $? $(tail -1 $out/flags.log)"
fi
