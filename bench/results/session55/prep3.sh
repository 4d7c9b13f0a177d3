#!/usr/bin/env bash
# Call 3's carry, build-s55t/b.tar.xz (unpacks to build-s55r/): two trace builds
# (-DFLASHSERVE_PREFILL_TRACE=ON, bench-only stamps; bench/trace_prefill.py): tree/ (the tree:
# v4.39's walks) and zz/ (with -DFLASHSERVE_PREFILL_WS_ZIGZAG=1 over every CUDA source: the
# candidate v4.40's zigzag static walk).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
bash bench/results/session47/prep_trace.sh > /dev/null
cmake -S . -B build-trace-zz -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHSERVE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DFLASHSERVE_USE_BLAS=OFF -DFLASHSERVE_PREFILL_HD256=ON -DFLASHSERVE_PREFILL_TRACE=ON \
  -DCMAKE_CUDA_FLAGS="-DFLASHSERVE_PREFILL_WS_ZIGZAG=1" > /dev/null
cmake --build build-trace-zz --parallel 2 --target flashserve_c > /dev/null
rm -rf build-s55r && mkdir -p build-s55r/tree build-s55r/zz
cp build-trace/libflashserve_c.so build-s55r/tree/
cp build-trace-zz/libflashserve_c.so build-s55r/zz/
strip --strip-unneeded build-s55r/*/libflashserve_c.so
rm -rf build-s55t && mkdir build-s55t && tar cJf build-s55t/b.tar.xz build-s55r
du -sh build-s55r build-s55t
