#!/usr/bin/env bash
# Session 21 call 2: why a paged tile costs 8-13% more cycles than a packed one (call 1's traces).
# A/B of v4.13 (build-g21a) against its row gather with an L2::256B prefetch hint on each cp.async
# (build-g21b), each one CTA an item and on the dynamic walk; ncu (full set, SASS source) of
# 2k over 30k packed (row 13) and in 16-token pages on the dynamic walk (row 11); sanitizers
# on build-g21a (grid cases packed and paged, and the page sizes 1..256 with the 176-key
# row-gather runs). <= 8 files back.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
A=build-g21a
timeout 120 python3 bench/ab_prefill.py --lib $A/libflashserve_c.so --only 13,11,12,3,6,14,5,23,2,22,19 \
  --config l2=@build-g21b/libflashserve_c.so --config p1=FLASHSERVE_PREFILL_WS_PERSISTENT=1 \
  --config l2p1=@build-g21b/libflashserve_c.so,FLASHSERVE_PREFILL_WS_PERSISTENT=1 2>&1 | tee $out/ab_l2.log
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
for spec in 13: 11:FLASHSERVE_PREFILL_WS_PERSISTENT=1; do
  row=${spec%%:*}; env=${spec#*:}; extra=""; [ -n "$env" ] && extra="--env $env"
  timeout 110 $NCU --clock-control none --set full --import-source yes -k "regex:prefill_sm90_ws" \
    --launch-skip 2 --launch-count 1 -f -o /tmp/w/ncu_$row python3 bench/ncu_prefill.py --lib $A/libflashserve_c.so \
    --row $row $extra > /tmp/w/ncu_$row.run.log 2>&1
  echo "ncu row $row rc $? $(tail -1 /tmp/w/ncu_$row.run.log)"
  $NCU --import /tmp/w/ncu_$row.ncu-rep --page details > /tmp/w/ncu_$row.details.txt 2>&1
  $NCU --import /tmp/w/ncu_$row.ncu-rep --page source --print-source sass --csv > /tmp/w/ncu_$row.sass.csv 2>&1
  grep -E "Duration|SM Frequency|L2 Hit Rate|DRAM Throughput|Memory Throughput|L1/TEX Hit|Issue Slots Busy|No Eligible|Warp Cycles Per Issued" /tmp/w/ncu_$row.details.txt | head -12
done
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)PrefillCuda.PageSizesOneTo256
for tool in memcheck racecheck synccheck; do
  timeout 100 /usr/local/cuda/bin/compute-sanitizer --tool $tool $A/tests/test_prefill_cuda --gtest_filter="$cases" > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_$tool.log | tr '\n' ' ')"
done
cd /tmp/w && rm -f *.ncu-rep && tar cJf $out/call2_logs.tar.xz *.log *.txt *.csv
