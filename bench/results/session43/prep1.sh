#!/usr/bin/env bash
# Session 43, issue 22: build-s43a/ = build-gpu's library (the tree) and gd1..gd3/, d 128's paged
# bf16 no-transform instances (128 and 176 keys) with FLASHSERVE_PREFILL_WS_GATHER_DIAG=1..3
# (the row gather's copies: none; K's alone; each twice), all stripped.
set -euo pipefail
cd "$(dirname "$0")/../../.."
S=(attention/cuda/prefill_sm90_ws_hd128{,n176}_bf16_paged.cu)
ninja -C build-gpu flashserve_c > /dev/null
rm -rf build-s43a && mkdir -p build-s43a
cp build-gpu/libflashserve_c.so build-s43a/
for g in 1 2 3; do
  bash bench/variant_lib.sh gd$g "-DFLASHSERVE_PREFILL_WS_GATHER_DIAG=$g" "${S[@]}" > /dev/null
  mkdir -p build-s43a/gd$g && cp build-var/gd$g/libflashserve_c.so build-s43a/gd$g/
done
strip --strip-unneeded build-s43a/*.so build-s43a/*/*.so
du -sh build-s43a
