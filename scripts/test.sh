#!/usr/bin/env bash
# Sets up, builds and runs every test. GPU tests (label gpu) report themselves skipped where
# there is no usable CUDA device. Then the sanitizer job: the CPU suite under ASan+LSan+UBSan
# (scripts/test_asan.sh; FLASHSERVE_SKIP_ASAN=1 leaves it out of a local run).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure --timeout 900 -j "${FLASHSERVE_TEST_JOBS:-2}")
if [ "${FLASHSERVE_SKIP_ASAN:-0}" != 1 ]; then bash scripts/test_asan.sh; fi
