#!/usr/bin/env bash
# Builds here, for the GPU machine (sm_90a only, to keep the build short), into build-gpu/:
# the CUDA tests, benchmarks, libflashserve_c.so and tools/page_stream, with the CUDA runtime
# linked statically and no BLAS (cuBLAS comes from the GPU machine's CUDA install; see
# gpu_check.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHSERVE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90a-real -DFLASHSERVE_USE_BLAS=OFF -DFLASHSERVE_PREFILL_HD256=ON >/dev/null
# page_stream, pipe_rates, bulk_rate: diagnostics (bench/page_stream.cu, bench/pipe_rates.cu, bench/bulk_rate.cu; not part of the check).
cmake --build build-gpu --parallel 2 --target test_decode_cuda test_fp8_cuda test_skinny_gemm_cuda test_kv_storage_cuda test_prefill_cuda test_model_cuda test_sampler_cuda flashserve_c bench_kvcache bench_model hf_dump page_stream pipe_rates bulk_rate
