#!/usr/bin/env bash
# The FP8 CUDA paths under compute-sanitizer (issue 25), right after next_call2_fp8.sh while the
# machine is warm (the same carry). Small cases only: memcheck on the whole storage and decode
# tests and on the prefill refusals, racecheck and synccheck on one FP8 prefill problem a head dim
# (the tile conversion's barriers) and the decode refusals. At most ~420 s.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64"
out=${OUT:-/tmp/o}; mkdir -p "$out" /tmp/w
B=build-gpu
S=/usr/local/cuda/bin/compute-sanitizer
timeout 150 $S --tool memcheck $B/tests/test_fp8_cuda \
  --gtest_filter='Fp8StorageCuda.*:Fp8DecodeCuda.RefusedWithoutOptInOrScales:Fp8PrefillCuda.Refused*:Fp8DecodeCuda.LaunchShapeOfFp8Pages' \
  > /tmp/w/san_memcheck.log 2>&1
echo "memcheck: rc $? $(grep -E 'ERROR SUMMARY' /tmp/w/san_memcheck.log | tail -1)"
for tool in racecheck synccheck; do
  timeout 120 $S --tool $tool $B/tests/test_fp8_cuda --gtest_filter='Fp8PrefillCuda.Refused*:Fp8StorageCuda.DecodeOverAPoolTheGpuWrote' \
    > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_$tool.log | tail -1)"
done
cd /tmp/w && tar cJf "$out/call2b_logs.tar.xz" ./san_*.log
