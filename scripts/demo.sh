#!/usr/bin/env bash
# Sets up, builds and runs the CPU attention demo (examples/demo/) on the embedded default backend.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
./build/examples/demo/flashserve_demo
