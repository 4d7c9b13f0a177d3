#!/usr/bin/env bash
# Session 19 call 2: E1 (producer waits parked: try_wait with a suspend-time hint), E2 (+ K/V
# descriptors from low words), E3 (+ Q's too, warp-uniform, every head dim): tests, A/B against
# main (build-g19), ncu of E3, racecheck/synccheck. Everything under $OUT in <= 8 files.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
C=build-g19c
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
$C/tests/test_prefill_cuda --gtest_brief=1 > /tmp/w/test_e3.log 2>&1; echo "e3 prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_e3.log | tr '\n' ' ')"
grep -E "Failure|FAILED" /tmp/w/test_e3.log | head -5
timeout 330 python3 bench/ab_prefill.py --lib $C/libflashserve_c.so --config main=@build-g19/libflashserve_c.so \
  --config e1=@build-g19a/libflashserve_c.so --config e2=@build-g19b/libflashserve_c.so \
  --config e3_176=FLASHSERVE_PREFILL_WS_BLOCK_N=176 2>&1 | tee $out/ab_e123.log
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for row in 4 0; do
  timeout 60 $NCU --clock-control none --set full --import-source yes -k regex:prefill_sm90_ws --launch-skip 2 --launch-count 1 -f -o /tmp/w/n_$row \
    python3 bench/ncu_prefill.py --lib $C/libflashserve_c.so --row $row > /tmp/w/n_$row.log 2>&1; echo "ncu row $row rc $?"
  $NCU --import /tmp/w/n_$row.ncu-rep --page details > /tmp/w/ncu_e3_$row.details.txt 2>&1
  $NCU --import /tmp/w/n_$row.ncu-rep --page source --print-source sass --csv > /tmp/w/ncu_e3_$row.sass.csv 2>&1
  grep -E "Duration|SM Frequency|Issue Slots Busy|Local Memory Spilling Requests  " /tmp/w/ncu_e3_$row.details.txt | head -5
done
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in racecheck synccheck; do
  timeout 150 /usr/local/cuda/bin/compute-sanitizer --tool $tool $C/tests/test_prefill_cuda --gtest_filter="$cases" > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_$tool.log | tail -1)"
done
cd /tmp/w && tar cJf $out/call2_logs.tar.xz *.log *.txt *.csv
