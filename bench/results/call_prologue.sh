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
# (el passes the status it was called under on: in "$(el) ... rc $?" the $? is read after $(el) has
# run, so it is el's. Until session 56 it was 0 there, whatever the command before had returned.)
el() { local rc=$?; echo "[$(( $(date +%s) - t0 )) s]"; return $rc; }
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
# go AT: true while the call is before AT s of a plan of GO_SPAN s (590 unless set), the plan
# scaled to DL s where the call is given less; else says the step is skipped (false).
go() {
  local span=${GO_SPAN:-590}
  local at=$(( $1 * ${DL:-$span} / span ))
  [ $(( $(date +%s) - t0 )) -lt "$at" ] || { echo "$(el) skipped: past $at s"; false; }
}
# sanitize TOOL SECONDS BINARY FILTER [NAME]: compute-sanitizer's TOOL over the gtest cases FILTER,
# its log in $out/san_NAME.log (NAME: TOOL), its summary line printed (the caller's environment
# passes through; SAN_KERNELS=SUBSTRING instruments only the kernels whose names hold it).
sanitize() {
  local log="$out/san_${5:-$1}.log"
  timeout "$2" /usr/local/cuda/bin/compute-sanitizer --tool "$1" ${SAN_KERNELS:+--kernel-name kns=$SAN_KERNELS} "$3" \
    --gtest_filter="$4" > "$log" 2>&1
  echo "$(el) $1 ${5:-} rc $? $(grep -E 'RACECHECK SUMMARY|ERROR SUMMARY|^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
}
# ws_sanitize TEST MEMCHECK_FILTER SYNCCHECK_FILTER CASE...: the warp-specialized prefill kernels
# alone instrumented, test_prefill_cuda at TEST: memcheck (90 s) and synccheck (60 s) over the
# filters, racecheck (60 s) over each grid case CASE (logs san_memcheck, san_synccheck, san_raceCASE).
ws_sanitize() {
  local t=$1 mem=$2 sync=$3 c
  shift 3
  SAN_KERNELS=prefill_sm90_ws sanitize memcheck 90 "$t" "$mem" memcheck
  SAN_KERNELS=prefill_sm90_ws sanitize synccheck 60 "$t" "$sync" synccheck
  for c in "$@"; do
    SAN_KERNELS=prefill_sm90_ws sanitize racecheck 60 "$t" "Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/$c" "race$c"
  done
}
# suite BINARY [SECONDS] [NAME] [FILTER]: a gtest binary whole (or the cases FILTER), its log in
# $out/NAME.log (NAME: the binary's), the summary and the first failures printed.
suite() {
  local log="$out/${3:-$(basename "$1")}.log"
  timeout "${2:-170}" "$1" --gtest_brief=1 ${4:+--gtest_filter="$4"} > "$log" 2>&1
  echo "$(el) $(basename "$log" .log) rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$log" | head -6
  return 0  # (grep finds nothing where all passed; the call's rc is not the tests')
}
# test_prefill_cuda's cases over pages (a FILTER for suite): big pages, every page size, the grid,
# the skewed batches.
PAGE_CASES='PrefillCuda.BigPages:PrefillCuda.PageSizesOneTo256:Gpu/PrefillCudaGrid.MatchesReferenceAndCpu/*:PrefillCuda.SkewedVarlenBatches'
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
# prefill_grid TEST [NAME]: the GPU prefill grid and the skewed batches (test_prefill_cuda at TEST),
# log in $out/test_prefill.log (test_prefill_NAME.log), the summary and the first failures printed.
prefill_grid() {
  local log="$out/test_prefill${2:+_$2}.log"
  timeout 90 "$1" --gtest_brief=1 --gtest_filter='Gpu/PrefillCudaGrid.*:PrefillCuda.SkewedVarlenBatches' \
    > "$log" 2>&1
  echo "$(el) prefill ${2:-} rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$log" | head -6
  return 0  # (grep finds nothing where all passed; the call's rc is not the tests')
}
# ab NAME PASSES ROWS [CONFIG...]: ab_prefill.py over ROWS (--only) with $B's library as the
# default and each CONFIG as --config (NAME=@LIB or NAME=VAR=VAL), PASSES passes, 200 s at most;
# log $out/ab_NAME.log, its first pass's rows printed.
ab() {
  local name=$1 passes=$2 rows=$3 c args=()
  shift 3
  for c in "$@"; do args+=(--config "$c"); done
  timeout 200 python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes "$passes" --only "$rows" \
    "${args[@]}" > "$out/ab_$name.log" 2>&1
  echo "$(el) ab $name rc $?"
  grep -v again "$out/ab_$name.log"
}
