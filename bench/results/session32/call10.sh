#!/usr/bin/env bash
# Session 32 call 10 (issue 22): why d 128's one-block tile loop (the plain run, v4.20 "nobound")
# runs 16x1k 5% faster than main's general loop and 1x16k 3% slower. ncu of our kernel, rows 0
# (16x1k) and 4 (1x16k), main's library and nobound's: SpeedOfLight, WarpStateStats,
# SchedulerStats, InstructionStats, and the source page (per-SASS-instruction stall samples,
# xz-compressed CSV). Carry build-call10/.
B=build-call10
source bench/results/call_prologue.sh
final=$out; out=/tmp/w; mkdir -p $out  # one tarball back (a call returns at most 8 files)
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
src() {  # name lib row
  local name=$1 lib=$2 row=$3
  timeout 90 $NCU --clock-control none -k "regex:prefill_sm90_ws" --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SchedulerStats --section InstructionStats \
    --section SourceCounters --section LaunchStats -f -o $out/rep_$name \
    python3 bench/ncu_prefill.py --lib $lib --row $row > $out/run_$name.log 2>&1
  echo "$(el) $name rc $?"
  $NCU -i $out/rep_$name.ncu-rep --page details > $out/details_$name.txt 2>&1
  $NCU -i $out/rep_$name.ncu-rep --page source --csv --print-source sass > $out/src_$name.csv 2>/dev/null
  rm -f $out/rep_$name.ncu-rep
  grep -E "Duration|Issue Slots Busy|Issued Warp Per|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Compute \(SM\) Throughput|Registers Per" $out/details_$name.txt | head -12
  xz -9 $out/src_$name.csv
}
src main0 $B/libflashserve_c.so 0
src nobound0 $B/nobound/libflashserve_c.so 0
src main4 $B/libflashserve_c.so 4
src nobound4 $B/nobound/libflashserve_c.so 4
tar czf $final/call10.tgz -C $out .
