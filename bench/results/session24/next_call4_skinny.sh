#!/usr/bin/env bash
# Session 24 (no GPU) wrote the skinny GEMMs for the decode projections (issue 27; model.md
# "Skinny GEMMs", NOTES "Skinny GEMMs (issue 27), session 24"), never run. Their first GPU call,
# prepared here: bash scripts/build_gpu.sh, carry build-gpu/tests/test_skinny_gemm_cuda,
# build-gpu/tests/test_model_cuda and build-gpu/bench/bench_model (about 15 MB), then
#   bash bench/results/session24/next_call4_skinny.sh
# Steps (at most ~540 s): the skinny GEMM tests (every epilogue against float64, rows 1-32, the 8B shapes),
# the model tests that cross-check it (skinny against cuBLAS and the CPU; the plain one as a
# regression check), bench_model: the decode rows with cuBLAS and with skinny GEMMs up to batch
# 32 beside the floor, and the per-GEMM table
# (skinny, fused and launched epilogues, against cuBLAS at 1..32 rows: the crossover); then
# memcheck and racecheck on the refusals and the graph-replayed fused epilogue.
# Prediction: decode step at batch 1, 1k: 4.3-4.8 ms (75-85% of the 3.64 ms floor; cuBLAS
# 5.86-6.12); per GEMM 80-90% of the read bandwidth on gate|up, down, lm_head at <= 8 rows.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64"
out=${OUT:-/tmp/o}; mkdir -p "$out" /tmp/w
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-gpu
timeout 90 $B/tests/test_skinny_gemm_cuda > /tmp/w/test_skinny.log 2>&1
echo "skinny rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_skinny.log | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is|off, first" /tmp/w/test_skinny.log | head -12
timeout 60 $B/tests/test_model_cuda --gtest_filter='LlamaCuda.SkinnyGemmsMatchCublas:LlamaCuda.MatchesCpuModelWithinBf16' \
  > /tmp/w/test_model.log 2>&1
echo "model rc $? $(grep -E '^\[  (PASSED|FAILED) ' /tmp/w/test_model.log | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" /tmp/w/test_model.log | head -8
timeout 240 $B/bench/bench_model 2>&1 | tee "$out/bench_model_skinny.log" | tail -45
for tool in memcheck racecheck; do
  timeout 60 /usr/local/cuda/bin/compute-sanitizer --tool $tool $B/tests/test_skinny_gemm_cuda \
    --gtest_filter='SkinnyGemmCuda.RefusesWhatItDoesNotTake:SkinnyGemmCuda.FusedEpilogueReplaysInAGraph' > /tmp/w/san_$tool.log 2>&1
  echo "$tool: rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/w/san_$tool.log | tail -1)"
done
cd /tmp/w && tar cJf "$out/call4_logs.tar.xz" ./*.log
