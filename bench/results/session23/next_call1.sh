#!/usr/bin/env bash
# Session 23 (no GPU: loans paused) left the varlen walk (WsVarlenOrder in the kernel) as a patch,
# unrun. Its first GPU call, prepared here. Before the call, on the build machine:
#   git apply bench/results/session23/prefill_varlen_walk.patch
#   git stash && bash scripts/build_gpu.sh && mkdir -p build-gpu/old && cp build-gpu/libflashserve_c.so build-gpu/old/ && git stash pop
#   bash scripts/build_gpu.sh
# then run with carry: build-gpu/libflashserve_c.so, build-gpu/tests/test_prefill_cuda, build-gpu/old
#   bash bench/results/session23/next_call1.sh
# Steps (~450 s): the GPU prefill tests (the new SkewedVarlenBatches and the VARLEN=0 run of every
# case), same-run A/B (the varlen rows 24-28: the varlen walk / the grid order's dynamic walk
# (FLASHSERVE_PREFILL_WS_VARLEN=0) / main's library; the uniform rows 0,1,3,5,6,11,22 against
# main's library: level expected, the producer's code changed by a few instructions a tile),
# then compute-sanitizer (memcheck, synccheck with the varlen test; racecheck on the grid cases,
# whose 3-CTA persistent runs take the varlen walk).
# Prediction: skew rows 1.2-1.8x the grid order's (65536 grid items of which ~3800 exist at d 128;
# paged more, its claims take a named barrier each), the mix row +5-15%, uniform rows level.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p "$out" /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-gpu
timeout 150 $B/tests/test_prefill_cuda --gtest_brief=1 > /tmp/w/test.log 2>&1
echo "prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test.log | tr '\n' ' ')"
grep -E "Failure|FAILED" /tmp/w/test.log | head -6
timeout 220 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 2 --only 24,25,26,27,28,0,1,3,5,6,11,22 \
  --config grid=FLASHSERVE_PREFILL_WS_VARLEN=0 --config old=@$B/old/libflashserve_c.so 2>&1 | tee "$out/ab_varlen.log"
cases=$(printf 'Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/%s:' 0 34 45 46 47)
for tool in memcheck synccheck; do
  timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_prefill_cuda --gtest_filter="${cases}PrefillCuda.SkewedVarlenBatches" > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY' /tmp/w/san_$tool.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_$tool.log | tr '\n' ' ')"
done
timeout 120 /usr/local/cuda/bin/compute-sanitizer --tool racecheck $B/tests/test_prefill_cuda --gtest_filter="${cases%:}" > /tmp/w/san_racecheck.log 2>&1
echo "racecheck: rc $? $(grep -E 'RACECHECK SUMMARY' /tmp/w/san_racecheck.log | tail -1) $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/san_racecheck.log | tr '\n' ' ')"
cd /tmp/w && tar cJf "$out/call1_logs.tar.xz" ./*.log
