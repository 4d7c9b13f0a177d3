#!/usr/bin/env bash
# Session 33 call 5 (issue 22): ncu of prefill v4.23 at d 128, rows 0, 1 (16x1k, causal) and 4
# (1x16k), where the short rows still lose to cuDNN (0.86 / 0.88, call 4): SpeedOfLight,
# WarpStateStats, SchedulerStats, InstructionStats, and the source page (per-SASS-instruction
# stall samples, xz-compressed CSV). Carry build-call5/.
B=build-call5
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
src v423_0 $B/libflashserve_c.so 0
src v423_1 $B/libflashserve_c.so 1
src v423_4 $B/libflashserve_c.so 4
tar czf $final/call5.tgz -C $out .
