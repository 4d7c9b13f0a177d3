#!/usr/bin/env bash
# Builds call3.sh's build-call/ here (51 MB): main's library and tests, and the bench variants
# (bench/variant_lib.sh; build-gpu must be current: scripts/build_gpu.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c test_prefill_cuda test_fp8_cuda
ws=(attention/cuda/prefill_sm90_ws_hd{64,128,128n176,256}_{bf16,fp16}{,_paged}.cu attention/cuda/prefill_sm90_ws_hd128_fp8{,_reg}.cu)
bench/variant_lib.sh trace "-DFLASHSERVE_PREFILL_TRACE=1" "${ws[@]}" attention/cuda/prefill_cuda.cu
VARIANT_TESTS=test_prefill_cuda bench/variant_lib.sh stsm "-DFLASHSERVE_PREFILL_WS_O_STSM=1" "${ws[@]}"
bench/variant_lib.sh early "-DFLASHSERVE_PREFILL_WS_EARLY_CLAIM=1" attention/cuda/prefill_sm90_ws_hd{64,128,128n176,256}_{bf16,fp16}.cu
bench/variant_lib.sh trace_early "-DFLASHSERVE_PREFILL_TRACE=1 -DFLASHSERVE_PREFILL_WS_EARLY_CLAIM=1" "${ws[@]}" \
  attention/cuda/prefill_cuda.cu
# lean0: the FP8 register path before v6 (its SASS session 35's main's, md5 324489c7...).
bench/variant_lib.sh lean0 "-DFLASHSERVE_PREFILL_WS_FP8_REG_LEAN=0" attention/cuda/prefill_sm90_ws_hd128_fp8_reg.cu
rm -rf build-call && mkdir -p build-call/tests build-call/stsm/tests
cp build-gpu/libflashserve_c.so build-call/
cp build-gpu/tests/test_fp8_cuda build-gpu/tests/test_prefill_cuda build-call/tests/
for v in trace stsm early trace_early lean0; do mkdir -p build-call/$v && cp build-var/$v/libflashserve_c.so build-call/$v/; done
cp build-var/stsm/tests/test_prefill_cuda build-call/stsm/tests/
strip --strip-unneeded build-call/*.so build-call/*/*.so build-call/tests/* build-call/stsm/tests/*
du -sh build-call
