# The prologue of a GPU call script (sourced, from the repository root): strict-ish shell, the
# CUDA libraries first (LIBS before them where the call carries its own, e.g. a pack's lib/),
# $out for the files that come back, $B the carried build, el() the seconds since the start, and
# the card's name, clock, temperature and power at the start.
set -uo pipefail
export LD_LIBRARY_PATH="${LIBS:+$LIBS:}/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}
mkdir -p "$out"
B=${B:-build-gpu}
t0=$(date +%s)
el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
