#!/usr/bin/env bash
# The prefill benchmark's PyPI peers, brought to the GPU machine (which has no network) within
# the 64 MiB a call may carry.
#   here:  bash scripts/gpu_peers.sh prepare   -> .whl/fa3/ (FlashAttention-3, the hopper/ build of
#          tokenspeed-fa3: its 300 MB extension xz-compressed to ~23 MB; the wheel is 60 MiB)
#          bash scripts/gpu_peers.sh prepare-flashinfer -> .whl/fi/fi-site.tar.xz (14 MB): FlashInfer
#          0.7.2.post1 for its fa3 prefill JIT, less what that never reads (see below)
#   there: source scripts/gpu_peers.sh install  -> unpacks what was carried into /tmp/site and puts
#          it on PYTHONPATH; for FlashInfer also the env its JIT needs (cache in /tmp/fi-cache, kept
#          while the machine stays warm)
# FlashInfer: the wheel (62 MB) names cuda-tile, nvidia-cutlass-dsl, nccl4py, cudnn-frontend... in
# Requires-Dist, but `import flashinfer` + the fa3 prefill JIT import only torch, tvm_ffi, packaging,
# requests, pynvml, tqdm and numpy (the rest are imported lazily or under try/except). tvm_ffi and the
# small pure-Python ones travel; they go to /tmp/site-deps, which bench/flashinfer_shim.py appends to
# sys.path (the machine's own copies win; typing_extensions too unless older than tvm_ffi's 4.13,
# as Ubuntu 24.04's 4.10 is); numpy is not carried (only flashinfer.attn_scores and
# fused_moe import it at module level): the shim stubs it during the import where it is absent.
# The tree keeps every .py of flashinfer, and of data/ only the include dirs the JIT passes to nvcc
# and the csrc templates of batch prefill (csrc is 258 MB: the sources of every other kernel).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
FA3=tokenspeed-fa3==3.0.0.post20260810
FI="flashinfer-python==0.7.2.post1 apache-tvm-ffi==0.1.15.post2"
FI_DEPS="packaging==26.4 tqdm==4.70.1 nvidia-ml-py==13.615.71 requests==2.34.2 urllib3==2.8.0 idna==3.20
  charset-normalizer==3.5.3 certifi==2026.10.19.post1 typing-extensions==4.16.0 ninja==1.13.2"
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
    if [ -f .whl/fi/fi-site.tar.xz ]; then echo "gpu_peers: .whl/fi ready"; ls -la .whl/fi; exit 0; fi
    tmp=$(mktemp -d)
    # shellcheck disable=SC2086
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform manylinux2014_x86_64 \
      --platform manylinux_2_5_x86_64 -d "$tmp/whl" $FI $FI_DEPS
    mkdir -p "$tmp/x" "$tmp/site/bin" "$tmp/site-deps"
    for w in "$tmp"/whl/*.whl; do python3 -m zipfile -e "$w" "$tmp/x"; done
    root=$PWD x=$tmp/x
    # flashinfer without data/, then the data/ the fa3 prefill JIT reads (env.py's include dirs; the
    # batch_prefill* templates it renders; tvm_ffi_utils.h and the other csrc/*.h it includes)
    (cd "$x" && tar -cf - --exclude=flashinfer/data flashinfer b12x) | tar -xf - -C "$tmp/site"
    (cd "$x" && tar -cf - flashinfer/data/include flashinfer/data/cutlass/include \
      flashinfer/data/cutlass/tools/util/include flashinfer/data/cccl/cub flashinfer/data/cccl/libcudacxx/include \
      flashinfer/data/cccl/thrust flashinfer/data/spdlog/include flashinfer/data/csrc/batch_prefill* \
      flashinfer/data/csrc/*.h) | tar -xf - -C "$tmp/site"
    if [ ! -f "$tmp/site/flashinfer/data/csrc/batch_prefill_sm90_jit_binding.cu" ]; then
      echo "gpu_peers: the wheel's layout changed (no data/csrc/batch_prefill_sm90_jit_binding.cu)" >&2; exit 1
    fi
    mv "$x"/tvm_ffi "$x"/apache_tvm_ffi-*.dist-info "$tmp/site/"
    mv "$x"/flashinfer_python-*.dist-info "$tmp/site/" && rm -f "$tmp"/site/flashinfer_python-*.dist-info/RECORD
    install -m 755 "$x"/ninja-*.data/scripts/ninja "$tmp/site/bin/ninja"
    (cd "$x" && mv packaging tqdm pynvml.py requests urllib3 idna charset_normalizer certifi typing_extensions.py ./*.dist-info "$tmp/site-deps/")
    mkdir -p .whl/fi
    (cd "$tmp" && XZ_OPT="-6 -T2" tar -cJf "$root/.whl/fi/fi-site.tar.xz.part" site site-deps)
    mv .whl/fi/fi-site.tar.xz.part .whl/fi/fi-site.tar.xz
    rm -rf "$tmp"
    ls -la .whl/fi ;;
  install)
    mkdir -p /tmp/site/flash_attn_3
    if [ -f .whl/fa3/_C.abi3.so.xz ] && [ ! -f /tmp/site/flash_attn_3/_C.abi3.so ]; then
      xz -dc .whl/fa3/_C.abi3.so.xz > /tmp/site/flash_attn_3/_C.abi3.so && cp .whl/fa3/*.py /tmp/site/
    fi
    if [ -f .whl/fi/fi-site.tar.xz ]; then
      stamp=/tmp/site/.fi-site-$(stat -c %s .whl/fi/fi-site.tar.xz)
      if [ ! -f "$stamp" ]; then
        rm -rf /tmp/site/flashinfer /tmp/site/tvm_ffi /tmp/site-deps /tmp/site/.fi-site-*
        tar -xJf .whl/fi/fi-site.tar.xz -C /tmp && touch "$stamp"
      fi
    fi
    if [ -d /tmp/site/flashinfer ]; then
      # FlashInfer's JIT: nvcc from CUDA_HOME, ninja from /tmp/site/bin, sm_90a only, its cache (and
      # tvm-ffi's) under /tmp so it survives between calls while the machine is warm.
      export PATH="/tmp/site/bin:$PATH" CUDA_HOME="${CUDA_HOME:-/usr/local/cuda}"
      export FLASHINFER_WORKSPACE_BASE=/tmp/fi-cache TVM_FFI_CACHE_DIR=/tmp/fi-cache/tvm-ffi
      export FLASHINFER_CUDA_ARCH_LIST="${FLASHINFER_CUDA_ARCH_LIST:-9.0a}" FLASHSERVE_FI_DEPS=/tmp/site-deps
    fi
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}" ;;
  *) echo "usage: gpu_peers.sh prepare|prepare-flashinfer|install" >&2; exit 2 ;;
esac
