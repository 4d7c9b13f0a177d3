#!/usr/bin/env bash
# Session 39's first call (prepared in session 38, issue 22): build-s39/ (~45 MB) from build-gpu
# (the tree) and three A/B variants of its ws objects (bench/variant_lib.sh), each with its
# test_prefill_cuda:
#   nt64   -DFLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD=64: d 64's general tile loop without softcap /
#          ALiBi (their calls go to v3);
#   nt128  -DFLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD=128: the same at d 128 (FP8 pages too);
#   nt128p nt128 and -DFLASHSERVE_PREFILL_WS_PLAIN_D128=1: the plain run at d 128 beside the
#          masked loop;
# and two traced libraries (the d 64 ws objects and prefill_cuda.cu with FLASHSERVE_PREFILL_TRACE:
# only d 64 rows are traced with them): trace64 (the tree's d 64), trace_nt64 (nt64's).
set -euo pipefail
cd "$(dirname "$0")/../../.."
ninja -C build-gpu flashserve_c tests/test_prefill_cuda > /dev/null
d64=(attention/cuda/prefill_sm90_ws_hd64_{bf16,fp16}{,_paged}.cu attention/cuda/prefill_cuda.cu)
d128=(attention/cuda/prefill_sm90_ws_hd{128,128n176}_{bf16,fp16}{,_paged}.cu attention/cuda/prefill_sm90_ws_hd128_fp8{,_reg}.cu
  attention/cuda/prefill_cuda.cu)
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh nt64 "-DFLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD=64" "${d64[@]}" > /dev/null
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh nt128 "-DFLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD=128" "${d128[@]}" > /dev/null
VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh nt128p \
  "-DFLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD=128 -DFLASHSERVE_PREFILL_WS_PLAIN_D128=1" "${d128[@]}" > /dev/null
bash bench/variant_lib.sh trace64 "-DFLASHSERVE_PREFILL_TRACE=1" "${d64[@]}" > /dev/null
bash bench/variant_lib.sh trace_nt64 "-DFLASHSERVE_PREFILL_TRACE=1 -DFLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD=64" "${d64[@]}" > /dev/null
rm -rf build-s39 && mkdir -p build-s39
cp build-gpu/libflashserve_c.so build-s39/
for v in nt64 nt128 nt128p; do
  mkdir -p build-s39/$v && cp build-var/$v/libflashserve_c.so build-var/$v/tests/test_prefill_cuda build-s39/$v/
done
for v in trace64 trace_nt64; do mkdir -p build-s39/$v && cp build-var/$v/libflashserve_c.so build-s39/$v/; done
strip --strip-unneeded build-s39/*.so build-s39/*/*
du -sh build-s39
