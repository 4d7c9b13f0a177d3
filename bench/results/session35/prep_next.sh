#!/usr/bin/env bash
# Builds the next GPU session's calls' files here (build-call/): everything session 34's
# prep_next1.sh built (main's library, test_prefill_cuda and test_fp8_cuda; trace/; regmap/), and
#  - fp8v/: the FP8 producer with the three switches written for the e4m3 register path's integer
#    pipe, each bench-only and off on main (main's SASS unchanged, md5 of the instruction stream):
#    FLASHSERVE_PREFILL_WS_FP8_REG_MAP=1 (no odd-first selects), FLASHSERVE_PREFILL_WS_FP8_DIAG_RUNTIME=0
#    (no diagnosis branch a chunk: ptxas then predicates the loads, BSSY/BSYNC 18 -> 6) and
#    FLASHSERVE_FP8_HI_BY_IMAD=1 (a word's high half by IMAD.HI on the FMA pipe, not SHF): the
#    register path's tile loop 890 -> 686 instructions (SEL 132 -> 4, SHF 72 -> 8, BRA 44 -> 14),
#    with its test_fp8_cuda;
#  - hi/: FLASHSERVE_FP8_HI_BY_IMAD=1 alone on both FP8 instances (the copy path e4m3 takes now);
#  - tools/pipe_rates (with session 35's rows: SHF and IMAD.HI alone and beside cvt e4m3x2).
# build-gpu must be current (scripts/build_gpu.sh). Then carry build-call/ to next1.sh, next2.sh.
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c test_prefill_cuda test_fp8_cuda pipe_rates
bench/variant_lib.sh trace "-DFLASHSERVE_PREFILL_TRACE=1" \
  attention/cuda/prefill_sm90_ws_hd{64,128,128n176,256}_{bf16,fp16}{,_paged}.cu \
  attention/cuda/prefill_sm90_ws_hd128_fp8{,_reg}.cu attention/cuda/prefill_cuda.cu
VARIANT_TESTS=test_fp8_cuda bench/variant_lib.sh regmap "-DFLASHSERVE_PREFILL_WS_FP8_REG_MAP=1" \
  attention/cuda/prefill_sm90_ws_hd128_fp8_reg.cu
VARIANT_TESTS=test_fp8_cuda bench/variant_lib.sh fp8v \
  "-DFLASHSERVE_PREFILL_WS_FP8_REG_MAP=1 -DFLASHSERVE_PREFILL_WS_FP8_DIAG_RUNTIME=0 -DFLASHSERVE_FP8_HI_BY_IMAD=1" \
  attention/cuda/prefill_sm90_ws_hd128_fp8{,_reg}.cu
bench/variant_lib.sh hi "-DFLASHSERVE_FP8_HI_BY_IMAD=1" attention/cuda/prefill_sm90_ws_hd128_fp8{,_reg}.cu
rm -rf build-call && mkdir -p build-call/tests build-call/trace build-call/regmap build-call/fp8v build-call/hi build-call/tools
cp build-gpu/libflashserve_c.so build-call/
cp build-gpu/tests/test_prefill_cuda build-gpu/tests/test_fp8_cuda build-call/tests/
cp build-gpu/tools/pipe_rates build-call/tools/
cp build-var/trace/libflashserve_c.so build-call/trace/
cp build-var/regmap/libflashserve_c.so build-var/regmap/tests/test_fp8_cuda build-call/regmap/
cp build-var/fp8v/libflashserve_c.so build-var/fp8v/tests/test_fp8_cuda build-call/fp8v/
cp build-var/hi/libflashserve_c.so build-call/hi/
strip --strip-unneeded build-call/*.so build-call/*/*
du -sh build-call
# A call carries at most 64 MiB: past it, leave hi/ out and take its --config out of next2.sh.
[ "$(du -sm build-call | cut -f1)" -le 62 ] || echo "prep_next: build-call is over 62 MB: rm -rf build-call/hi" >&2
