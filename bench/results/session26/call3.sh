#!/usr/bin/env bash
# Session 26 call 3 (issue 27): the decode step's kernels as a chain of programmatic dependents.
# Before: the skinny GEMMs and decode were dependents, while their epilogue kernels, RMSNorm,
# rotary + append and the last rows' gather were plain launches, so each of the ~13 kernel
# boundaries of a layer drained the GPU. Now every kernel of the chain waits for its predecessor
# on the device (griddepcontrol.wait) and triggers its dependents at its start, and a skinny
# GEMM launched early prefetches its next 3 sub-slices of weights into the L2 before it waits.
# Built here: bash scripts/build_gpu.sh (bench_model and the CUDA tests). Carry
# build-gpu/bench/bench_model, build-gpu/tests/test_skinny_gemm_cuda, build-gpu/tests/test_model_cuda.
# Steps: the skinny and model tests (the GPU model against the CPU's, graph replay against
# eager: a kernel that ran ahead of its input would show); then bench_model --quick three ways:
# all dependents (the new default), the model's small kernels plain (FLASHSERVE_MODEL_PDL=0),
# nothing dependent (and FLASHSERVE_SKINNY_PDL=0).
# Floor at (1,1k): 3.63 ms (16.06 GB of weights at ~4.45 TB/s). Session 25: skinny-l 5.155 ms.
# Prediction: (1,1k) 4.6-4.9 ms with the chain (~416 boundaries a step, 0.5-1.3 us saved each),
# nothing-dependent ~5.3 ms.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64"
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
B=build-gpu
timeout 100 $B/tests/test_skinny_gemm_cuda > "$out/test_skinny.log" 2>&1
echo "skinny rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_skinny.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_skinny.log" | head -6
timeout 150 $B/tests/test_model_cuda > "$out/test_model.log" 2>&1
echo "model rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_model.log" | tr '\n' ' ')"
grep -E "Failure|FAILED" "$out/test_model.log" | head -6
for cfg in "pdl" "model_plain FLASHSERVE_MODEL_PDL=0" "none FLASHSERVE_MODEL_PDL=0 FLASHSERVE_SKINNY_PDL=0"; do
  name=${cfg%% *}; vars=${cfg#"$name"}
  env $vars timeout 130 $B/bench/bench_model --quick --steps-only > "$out/bench_model_$name.log" 2>&1
  echo "== $name ($vars) rc $?"; grep -A6 "^batch" "$out/bench_model_$name.log" | head -6
done
