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
  python3 python3-numpy              # scripts, the Python binding's tests
  openssl                            # the TLS test makes a certificate
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi
# The python3 on PATH may not be Debian's (pyenv, a venv): give it numpy from PyPI if it lacks it.
if ! python3 -c "import numpy" >/dev/null 2>&1; then
  echo "setup: numpy for $(command -v python3)"
  python3 -m pip install --quiet --disable-pip-version-check numpy >/dev/null 2>&1 || echo "setup: numpy not installed"
fi
