#!/usr/bin/env bash
# cuobjdump and nvdisasm where the CUDA install lacks them (this project's build machines have
# nvcc and ptxas only): from NVIDIA's PyPI wheels into /usr/local/bin. They read sm_90a objects
# that nvcc 13.0 wrote. For bench/sass_loops.py and the SASS checks in bench/history/.
set -euo pipefail
command -v cuobjdump >/dev/null && command -v nvdisasm >/dev/null && exit 0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pip download --quiet --no-deps -d "$tmp" "nvidia-cuda-cuobjdump==13.2.51" "nvidia-cuda-nvdisasm==13.2.*"
for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
install -m 755 "$tmp"/x/nvidia/cu13/bin/cuobjdump "$tmp"/x/nvidia/cu13/bin/nvdisasm /usr/local/bin/
cuobjdump --version | tail -1
