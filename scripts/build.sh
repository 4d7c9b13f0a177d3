#!/usr/bin/env bash
# Configures and builds flashserve into build/ (Release, Ninja, ccache). Extra arguments go to
# cmake's configure step, e.g. -DFLASHSERVE_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/ccache}"
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$PWD}"  # paths relative in ccache's keys: a fresh clone reuses objects
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build build --parallel "${FLASHSERVE_BUILD_JOBS:-2}"
