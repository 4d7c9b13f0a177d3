#!/usr/bin/env bash
# Sets up, builds and runs every test. GPU tests (label gpu) report themselves skipped where
# there is no usable CUDA device.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 900 -j "${FLASHSERVE_TEST_JOBS:-2}"
