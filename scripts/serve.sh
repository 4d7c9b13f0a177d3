#!/usr/bin/env bash
# Sets up, builds and runs the main job: the gRPC server on the embedded default (CPU,
# synthetic:tiny weights) at 127.0.0.1:50051 (FLASHSERVE_PORT to change). Ctrl-C drains it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
port="${FLASHSERVE_PORT:-50051}"
echo "flashserve: starting the server on 127.0.0.1:$port (CPU, synthetic:tiny). In another terminal:"
echo "  ./build/client/flashserve_cli --target 127.0.0.1:$port --tokens 1,2,3 --max-tokens 16"
echo "  ./build/client/flashserve_cli --target 127.0.0.1:$port --info"
exec ./build/server/flashserve_server --model synthetic:tiny --device cpu --port "$port"
