#!/usr/bin/env bash
# Builds next session's first call's variants here (issue 25, FP8 producer v5: the register path,
# fp8_regpath.patch) and leaves the tree as it was: build-call/ gets main's library, and
# fp8reg88/ and fp8reg96/ (the patch with the producer at 88 or 96 registers), each with its
# test_fp8_cuda linked against its objects. Then carry build-call/ to next1.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c test_fp8_cuda
rm -rf build-call && mkdir -p build-call
cp build-gpu/libflashserve_c.so build-call/
git apply bench/results/session33/fp8_regpath.patch
trap 'git apply -R bench/results/session33/fp8_regpath.patch' EXIT
for r in 88 96; do
  VARIANT_TESTS=test_fp8_cuda bench/variant_lib.sh fp8reg$r \
    "-DFLASHSERVE_PREFILL_WS_FP8_REGPATH=1 -DFLASHSERVE_PREFILL_WS_FP8_REGS=$r" attention/cuda/prefill_sm90_ws_hd128_fp8.cu
  mkdir -p build-call/fp8reg$r
  cp build-var/fp8reg$r/libflashserve_c.so build-var/fp8reg$r/tests/test_fp8_cuda build-call/fp8reg$r/
done
strip --strip-unneeded build-call/*.so build-call/*/*
du -sh build-call
