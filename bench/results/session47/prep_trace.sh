#!/usr/bin/env bash
# Call 2's carry: build-trace/libflashserve_c.so, the tree with -DFLASHSERVE_PREFILL_TRACE=ON
# (bench-only stamps; sm_90a as scripts/build_gpu.sh).
set -euo pipefail
cd "$(dirname "$0")/../../.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
cmake -S . -B build-trace -G Ninja -DCMAKE_BUILD_TYPE=Release -DFLASHSERVE_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90a-real \
  -DFLASHSERVE_USE_BLAS=OFF -DFLASHSERVE_PREFILL_HD256=ON -DFLASHSERVE_PREFILL_TRACE=ON > /dev/null
cmake --build build-trace --parallel 2 --target flashserve_c > /dev/null
strip --strip-unneeded build-trace/libflashserve_c.so
du -sh build-trace/libflashserve_c.so
