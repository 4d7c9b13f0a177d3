#!/usr/bin/env bash
# The prefill benchmark's PyPI peers, brought to the GPU machine (which has no network) within
# the 64 MiB a call may carry.
#   here:  bash scripts/gpu_peers.sh prepare   -> .whl/fa3/ (FlashAttention-3, the hopper/ build of
#          tokenspeed-fa3: its 300 MB extension xz-compressed to ~23 MB; the wheel is 60 MiB)
#          bash scripts/gpu_peers.sh prepare-flashinfer -> .whl/fi/ (flashinfer-python + apache-tvm-ffi
#          wheels; ~62 MiB: carry them in a call of their own)
#   there: source scripts/gpu_peers.sh install  -> unpacks what was carried into /tmp/site and puts
#          it on PYTHONPATH
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FA3=tokenspeed-fa3==3.0.0.post20260810
FI="flashinfer-python==0.7.2.post1 apache-tvm-ffi==0.1.15.post2"
case "${1:-}" in
  prepare)
    if [ -f .whl/fa3/_C.abi3.so.xz ]; then echo "gpu_peers: .whl/fa3 ready"; exit 0; fi
    tmp=$(mktemp -d)
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 -d "$tmp" "$FA3"
    (cd "$tmp" && python3 -m zipfile -e ./*.whl x)
    mkdir -p .whl/fa3
    cp "$tmp"/x/flash_attn_interface.py "$tmp"/x/flash_attn_config.py .whl/fa3/
    xz -T2 -9 -c "$tmp"/x/flash_attn_3/_C.abi3.so > .whl/fa3/_C.abi3.so.xz
    rm -rf "$tmp"
    ls -la .whl/fa3 ;;
  prepare-flashinfer)
    mkdir -p .whl/fi
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 -d .whl/fi $FI
    ls -la .whl/fi ;;
  install)
    mkdir -p /tmp/site/flash_attn_3
    if [ -f .whl/fa3/_C.abi3.so.xz ] && [ ! -f /tmp/site/flash_attn_3/_C.abi3.so ]; then
      xz -dc .whl/fa3/_C.abi3.so.xz > /tmp/site/flash_attn_3/_C.abi3.so && cp .whl/fa3/*.py /tmp/site/
    fi
    if ls .whl/fi/*.whl >/dev/null 2>&1; then
      python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/fi/*.whl
    fi
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" ;;
  *) echo "usage: gpu_peers.sh prepare|prepare-flashinfer|install" >&2; exit 2 ;;
esac
