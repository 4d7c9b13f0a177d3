#!/usr/bin/env bash
# Sets up, builds and runs the main job: the gRPC server on the embedded default, the real
# SmolLM2-135M-Instruct (a Q4_1 GGUF that setup puts into the model cache; nothing is
# downloaded at run time), on the CPU at 127.0.0.1:50051 (FLASHSERVE_PORT to change;
# FLASHSERVE_MODEL for another model, e.g. synthetic:tiny). Ctrl-C drains it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
port="${FLASHSERVE_PORT:-50051}"
model="${FLASHSERVE_MODEL:-${FLASHSERVE_MODEL_DIR:-$HOME/.cache/flashserve/models}/SmolLM2-135M-Instruct.Q4_1.gguf}"
echo "flashserve: starting the server on 127.0.0.1:$port (CPU, $model). In another terminal:"
echo "  ./build/client/flashserve_cli --target 127.0.0.1:$port --chat \"What is the capital of France?\" --max-tokens 64"
echo "  ./build/client/flashserve_cli --target 127.0.0.1:$port --prompt \"Once upon a time\" --max-tokens 32"
echo "  ./build/client/flashserve_cli --target 127.0.0.1:$port --info"
exec ./build/server/flashserve_server --model "$model" --device cpu --port "$port"
