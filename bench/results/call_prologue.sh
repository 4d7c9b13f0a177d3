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
# sanitize TOOL SECONDS BINARY FILTER: compute-sanitizer's TOOL over the gtest cases FILTER, its
# log in $out/san_TOOL.log, its summary line printed (the caller's environment passes through).
sanitize() {
  timeout "$2" /usr/local/cuda/bin/compute-sanitizer --tool "$1" "$3" --gtest_filter="$4" > "$out/san_$1.log" 2>&1
  echo "$(el) $1 rc $? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/san_$1.log" | tail -1)"
}
# pack_out: a call returns at most 8 files from $out (the rest are left out, session 32 lost a
# run's CSVs that way): with more, everything goes into $out/out.tgz. Call it last.
pack_out() {
  local n
  n=$(find "$out" -type f | wc -l)
  if [ "$n" -gt 8 ]; then
    tar czf /tmp/out.tgz -C "$out" . && find "$out" -mindepth 1 -delete && mv /tmp/out.tgz "$out/out.tgz"
    echo "$(el) $n files packed into out.tgz"
  fi
}
# prefill_grid TEST: the GPU prefill grid and the skewed batches (test_prefill_cuda at TEST), log in
# $out/test_prefill.log, the summary and the first failures printed.
prefill_grid() {
  timeout 90 "$1" --gtest_brief=1 --gtest_filter='Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches' \
    > "$out/test_prefill.log" 2>&1
  echo "$(el) prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_prefill.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$out/test_prefill.log" | head -6
}
