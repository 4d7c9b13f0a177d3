#!/usr/bin/env bash
# Session 20 call 1: v4.12 candidates. C (build-g20c): Q prefetched into the L2 by the producer,
# the consumers' ring run across items, the next item's S(0) issued with the last P·V; PF
# (build-g20pf): the prefetch alone; D (build-g20d): C's structure with the cross-item path off;
# E (build-g20e): C + the two rows' softmax chains interleaved (softmax_row_pair); F
# (build-g20f): main + softmax_row_pair; G (build-g20g): E without the carry-over in the
# 128 x 176 instance (the long rows' tile).  Tests of E (C's code and more; its grid adds a 3-CTA
# persistent run), A/B against main (build-g19f), sanitizers on E. <= 8 files back.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
E=build-g20e
timeout 200 $E/tests/test_prefill_cuda --gtest_brief=1 > /tmp/w/test_e.log 2>&1; echo "E prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_e.log | tr '\n' ' ')"
grep -E "Failure|FAILED|rror" /tmp/w/test_e.log | head -6
timeout 330 python3 bench/ab_prefill.py --lib $E/libflashserve_c.so --config main=@build-g19f/libflashserve_c.so \
  --config pf=@build-g20pf/libflashserve_c.so --config c=@build-g20c/libflashserve_c.so \
  --config d=@build-g20d/libflashserve_c.so --config f=@build-g20f/libflashserve_c.so \
  --config g=@build-g20g/libflashserve_c.so 2>&1 | tee $out/ab_c.log
timeout 50 python3 bench/ab_prefill.py --lib $E/libflashserve_c.so --only 7,18 --config e_ws=FLASHSERVE_PREFILL_KERNEL=ws \
  --config c_ws=@build-g20c/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=ws \
  --config main_ws=@build-g19f/libflashserve_c.so,FLASHSERVE_PREFILL_KERNEL=ws 2>&1 | tee $out/ab_d64ws.log
timeout 60 python3 bench/ab_prefill.py --lib $E/libflashserve_c.so --only 6,11,12,14,19 --config e_p1=FLASHSERVE_PREFILL_WS_PERSISTENT=1 \
  --config main_p1=@build-g19f/libflashserve_c.so,FLASHSERVE_PREFILL_WS_PERSISTENT=1 2>&1 | tee $out/ab_paged_p1.log
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in racecheck synccheck; do
  timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool $E/tests/test_prefill_cuda --gtest_filter="$cases" > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_$tool.log | tail -1)"
done
cd /tmp/w && tar cJf $out/call1_logs.tar.xz *.log
