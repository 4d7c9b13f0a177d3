#!/usr/bin/env bash
# Packs what a GPU-machine call needs from build-gpu/ into one folder to carry (the call takes
# 64 MiB and 8 paths): the C ABI library, the GPU tests and benchmarks, and, where they were
# built, the server and the load-test client with the shared libraries they link that the GPU
# machine (Ubuntu 24.04, CUDA, no gRPC) lacks: gRPC, Protobuf, Abseil, c-ares, RE2, spdlog 1.10,
# fmt, cpp-httplib, brotli, PCRE2 (libc, libstdc++, OpenSSL, zlib and CUDA's are the machine's
# own). There, `ln -sfn DEST build-gpu` and LD_LIBRARY_PATH=build-gpu/lib.
# Usage: gpu_pack.sh DEST [EXTRA_FILE:NAME ...] (e.g. /tmp/old/flashserve_server:server_before).
# PACK_LEAN=1: the serving pack only (the library, bench_model, the server and the client, their
# libraries), stripped: 44 MB where the whole pack is 97 MB, over a call's 64 MiB with the tree
# (issue 27's calls, session 40).
set -euo pipefail
cd "$(dirname "$0")/.."
dest=$1
shift
rm -rf "$dest"
mkdir -p "$dest/tests" "$dest/bench" "$dest/server" "$dest/client" "$dest/lib"
cp build-gpu/libflashserve_c.so "$dest/"
[ -d build-gpu/old ] && cp -r build-gpu/old "$dest/old"
for t in test_decode_cuda test_fp8_cuda test_skinny_gemm_cuda test_kv_storage_cuda test_prefill_cuda test_model_cuda test_sampler_cuda; do
  [ -f "build-gpu/tests/$t" ] && cp "build-gpu/tests/$t" "$dest/tests/"
done
for b in bench/bench_kvcache bench/bench_model server/hf_dump server/flashserve_server server/kv_cache_ppl client/flashserve_bench; do
  [ -f "build-gpu/$b" ] && cp "build-gpu/$b" "$dest/$b"
done
for extra in "$@"; do cp "${extra%%:*}" "$dest/server/${extra##*:}"; done
# The shared libraries of the server and the client, less the machine's own.
for bin in "$dest"/server/* "$dest"/client/*; do
  ldd "$bin" | awk '$3 ~ /^\// {print $3}'
done | sort -u | grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libdl|libpthread|librt|libz|libssl|libcrypto)\.so|/cuda' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
if [ "${PACK_LEAN:-0}" = 1 ]; then
  rm -rf "$dest/tests" "$dest/old" "$dest/server/hf_dump" "$dest/server/kv_cache_ppl" "$dest/bench/bench_kvcache"
  find "$dest" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-unneeded {} + 2>/dev/null || true
fi
du -sh "$dest"
