#!/usr/bin/env bash
# Call 1's carry, build-s47/: build-s46's library and test_prefill_cuda (session46/prep5.sh, the
# tree at 13f4c50); ef/, ia/, efia/ (bench/variant_lib.sh: -DFLASHSERVE_PREFILL_WS_EARLY_FINISH=1,
# -DFLASHSERVE_PREFILL_WS_ITEM_AHEAD=1, both, in the bf16 packed instances of d 128 (128 and 176
# keys), d 64 (192 and 128 rows), d 256 and d 128's 176-key paged one; efia's test_prefill_cuda)
# trace/ (prep_trace.sh's library) and bulk_rate (bench/bulk_rate.cu).
set -euo pipefail
cd "$(dirname "$0")/../../.."
[ -f build-s46/libflashserve_c.so ] || bash bench/results/session46/prep5.sh
[ -f build-trace/libflashserve_c.so ] || bash bench/results/session47/prep_trace.sh
S=$(ls attention/cuda/prefill_sm90_ws_hd{128,128n176,64,64m128,256}_bf16.cu attention/cuda/prefill_sm90_ws_hd128n176_bf16_paged.cu)
[ -f build-var/ef/libflashserve_c.so ] || bash bench/variant_lib.sh ef "-DFLASHSERVE_PREFILL_WS_EARLY_FINISH=1" $S > /dev/null
[ -f build-var/ia/libflashserve_c.so ] || bash bench/variant_lib.sh ia "-DFLASHSERVE_PREFILL_WS_ITEM_AHEAD=1" $S > /dev/null
[ -f build-var/efia/libflashserve_c.so ] || VARIANT_TESTS=test_prefill_cuda bash bench/variant_lib.sh efia \
  "-DFLASHSERVE_PREFILL_WS_ITEM_AHEAD=1 -DFLASHSERVE_PREFILL_WS_EARLY_FINISH=1" $S > /dev/null
rm -rf build-s47 && mkdir -p build-s47/ef build-s47/ia build-s47/efia build-s47/trace
cp build-s46/libflashserve_c.so build-s46/test_prefill_cuda build-s47/
cp build-var/ef/libflashserve_c.so build-s47/ef/
cp build-var/ia/libflashserve_c.so build-s47/ia/
cp build-var/efia/libflashserve_c.so build-var/efia/tests/test_prefill_cuda build-s47/efia/
cp build-trace/libflashserve_c.so build-s47/trace/
cmake --build build-gpu --target bulk_rate flashserve_c test_kv_storage_cuda > /dev/null  # (session 49:
# session48/call1.sh runs bulk_rate, and the tree's library and test_kv_storage_cuda from tree/)
cp build-gpu/tools/bulk_rate build-s47/
mkdir -p build-s47/tree && cp build-gpu/libflashserve_c.so build-gpu/tests/test_kv_storage_cuda build-s47/tree/
strip --strip-unneeded build-s47/*.so build-s47/test_prefill_cuda build-s47/bulk_rate build-s47/*/*
du -sh build-s47
# The carry: build-s47x/b.tar.xz (~5 MB; the tree's tracked files count toward a call's 64 MiB too):
# the call unpacks it first (`tar xJf build-s47x/b.tar.xz`).
rm -rf build-s47x && mkdir build-s47x && tar cJf build-s47x/b.tar.xz build-s47
du -sh build-s47x
