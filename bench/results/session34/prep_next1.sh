#!/usr/bin/env bash
# Builds next session's first call's files here (build-call/, ~25 MB stripped): main's library and
# its test_prefill_cuda and test_fp8_cuda, and trace/, the same library with the ws instances and
# prefill_cuda.cu compiled with -DFLASHSERVE_PREFILL_TRACE=1 (bench/variant_lib.sh; WsTrace's
# stamps, bench-only), and regmap/ (the FP8 register path's paired lanes, with its test_fp8_cuda).
# build-gpu must be current (scripts/build_gpu.sh). Then carry build-call/
# to bench/results/session34/next1.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c test_prefill_cuda test_fp8_cuda
bench/variant_lib.sh trace "-DFLASHSERVE_PREFILL_TRACE=1" \
  attention/cuda/prefill_sm90_ws_hd{64,128,128n176,256}_{bf16,fp16}{,_paged}.cu \
  attention/cuda/prefill_sm90_ws_hd128_fp8{,_reg}.cu attention/cuda/prefill_cuda.cu
# regmap: the register path with WsFp8PairedLanes (no odd-first selects; not run), its test_fp8_cuda.
VARIANT_TESTS=test_fp8_cuda bench/variant_lib.sh regmap "-DFLASHSERVE_PREFILL_WS_FP8_REG_MAP=1" \
  attention/cuda/prefill_sm90_ws_hd128_fp8_reg.cu
rm -rf build-call && mkdir -p build-call/tests build-call/trace build-call/regmap
cp build-gpu/libflashserve_c.so build-call/
cp build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda build-call/tests/
cp build-var/trace/libflashserve_c.so build-call/trace/
cp build-var/regmap/libflashserve_c.so build-var/regmap/tests/test_fp8_cuda build-call/regmap/
strip --strip-unneeded build-call/*.so build-call/*/*
du -sh build-call
