#!/usr/bin/env bash
# Builds next session's first call's libraries here and leaves the tree as it was. build-call/
# gets main's library and test_prefill_cuda (with PoolsBeyondTheRowGathersReach, not yet run),
# and three variants, each with its tests linked against its objects:
#  - fp8reg88/, fp8reg96/ (issue 25): fp8_regpath.patch, the FP8 producer's register path at 88
#    or 96 registers, with test_fp8_cuda;
#  - ring/ (issue 22): v424_ring.patch, the consumers' ping-pong ring run on across items, every
#    ws instance (packed and paged, bf16 and fp16, FP8), with test_prefill_cuda; ring2/ the same in
#    the 128-key 16-bit instances only (-DFLASHSERVE_PREFILL_WS_RING_ACROSS=2), library only.
# Then carry build-call/ to next1.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c test_fp8_cuda test_prefill_cuda
rm -rf build-call && mkdir -p build-call/tests
cp build-gpu/libflashserve_c.so build-call/
cp build-gpu/tests/test_prefill_cuda build-call/tests/
variant() {  # PATCH NAME "FLAGS" "TESTS" SOURCES...
  local patch=$1 name=$2 flags=$3 tests=$4
  shift 4
  git apply "bench/results/session33/$patch"
  VARIANT_TESTS="$tests" bench/variant_lib.sh "$name" "$flags" "$@" || { git apply -R "bench/results/session33/$patch"; exit 1; }
  git apply -R "bench/results/session33/$patch"
  mkdir -p "build-call/$name"
  cp "build-var/$name/libflashserve_c.so" "build-call/$name/"
  for t in $tests; do cp "build-var/$name/tests/$t" "build-call/$name/"; done
}
for r in 88 96; do
  variant fp8_regpath.patch fp8reg$r "-DFLASHSERVE_PREFILL_WS_FP8_REGPATH=1 -DFLASHSERVE_PREFILL_WS_FP8_REGS=$r" test_fp8_cuda \
    attention/cuda/prefill_sm90_ws_hd128_fp8.cu
done
variant v424_ring.patch ring "" test_prefill_cuda attention/cuda/prefill_sm90_ws_hd{64,128,128n176,256}_{bf16,fp16}{,_paged}.cu \
  attention/cuda/prefill_sm90_ws_hd128_fp8.cu
# ring2: across items in the 128-key 16-bit instances only (the 176-key and FP8 ones as main's).
variant v424_ring.patch ring2 "-DFLASHSERVE_PREFILL_WS_RING_ACROSS=2" "" \
  attention/cuda/prefill_sm90_ws_hd{64,128,128n176,256}_bf16{,_paged}.cu attention/cuda/prefill_sm90_ws_hd128_fp8.cu
strip --strip-unneeded build-call/*.so build-call/*/* build-call/tests/*
git status --short attention
du -sh build-call
