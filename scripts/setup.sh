#!/usr/bin/env bash
# Installs every Debian/Ubuntu package flashserve needs. Idempotent, no prompts: when all
# packages are already present it does nothing (no apt-get update either).
# The CUDA toolkit is not a Debian package here: when nvcc is on PATH (or in
# /usr/local/cuda/bin) the build enables CUDA, otherwise it builds the CPU backend alone.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  libgtest-dev libgmock-dev          # tests
  libspdlog-dev libfmt-dev           # logging
  libopenblas-dev                    # CPU GEMMs (model)
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc  # server, client
  libcli11-dev nlohmann-json3-dev    # flags, json
  python3                            # scripts, python binding tests
  openssl                            # the TLS test makes a certificate
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
