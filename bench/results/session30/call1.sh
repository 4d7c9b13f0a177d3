#!/usr/bin/env bash
# Session 30 call 1 (issue 27): the sampler's fault found by combo23's memcheck (logprobs_kernel's
# block_best read past red_i: a ptxas 13.0 miscompile of the loop over the warps' partials, now
# shuffles) and the two-CTA bound restored. test_sampler_cuda under memcheck whole, then session
# 28's call8 (the GPU tests, bench_model steps and mixed steps, the server one step at a time
# against --overlap-steps).
# Carry build-gpu/pack, build-gpu/tests/{test_model_cuda,test_sampler_cuda,test_skinny_gemm_cuda,
# test_fp8_cuda}, build-gpu/bench/bench_model.
source bench/results/call_prologue.sh
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/tests/test_sampler_cuda > "$out/san_sampler.log" 2>&1
echo "$(el) memcheck sampler rc $? $(grep -E '^\[  (PASSED|FAILED) |ERROR SUMMARY' "$out/san_sampler.log" | tr '\n' ' ')"
LIMIT=$(( ${LIMIT:-585} - ($(date +%s) - t0) )) OUT=$out bash bench/results/session28/call8.sh
