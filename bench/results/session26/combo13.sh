#!/usr/bin/env bash
# Session 26: calls 1 and 3 in one (the GPU was refused most of the session): call1.sh (issues 25
# and 22: the FP8 producer v2, prefill v4.17's TMA store of O, their tests, sanitizers, benches),
# then call3.sh (issue 27: the decode step's chain of programmatic dependents). Carry
# build-gpu/libflashserve_c.so, build-gpu/tests/test_fp8_cuda, build-gpu/tests/test_prefill_cuda,
# build-gpu/bench/bench_model, build-gpu/tests/test_skinny_gemm_cuda, build-gpu/tests/test_model_cuda.
t0=$(date +%s)
bash bench/results/session26/call1.sh
echo "== call1 done in $(( $(date +%s) - t0 )) s"
bash bench/results/session26/call3.sh
echo "== call3 done in $(( $(date +%s) - t0 )) s"
