#!/usr/bin/env bash
# Runs tests/tokenizer_hf_check.py (exactness against Hugging Face tokenizers) in the test-tools
# venv that scripts/setup.sh makes; "skipped: ..." (ctest reads it) where that venv is missing.
#   tokenizer_hf_check.sh <flashserve_tokenize> <suite>|--bench
set -euo pipefail
cli="$1"; shift
venv="${FLASHSERVE_PYTOOLS:-$HOME/.cache/flashserve-pytools}"
if ! "$venv/bin/python" -c "import tokenizers, gguf" >/dev/null 2>&1; then
  echo "skipped: no test-tools venv with tokenizers and gguf at $venv (scripts/setup.sh makes it)"
  exit 0
fi
# One thread for HF, as for ours: the comparison and the benchmark are single-threaded.
export TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1
here="$(cd "$(dirname "$0")" && pwd)"
if [ "${1:-}" = "--bench" ]; then
  exec "$venv/bin/python" "$here/tokenizer_hf_check.py" --cli "$cli" "$@"
fi
exec "$venv/bin/python" "$here/tokenizer_hf_check.py" --cli "$cli" --suite "$1"
