#!/usr/bin/env bash
# Session 31 call 5 (issue 22): what cuDNN does at d 128 16x1k, the one row where it beats every
# other peer by 20% and runs as fast as at 1x16k (no short-sequence cost). ncu of cuDNN's kernel
# (torch SDPA) on rows 0 (16x1k) and 1 (causal), full set; its launch shape on row 4 (1x16k);
# ours on row 0 beside it, full set. Carry build-gpu/libflashserve_c.so.
source bench/results/call_prologue.sh
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prof() {  # who row set
  local who=$1 row=$2 set=$3 k="regex:prefill_sm90_ws"
  [ $who = cudnn ] && k="regex:sdpa|fmha|fprop|flash|attn|cudnn"
  timeout 70 $NCU --clock-control none $set -k "$k" --launch-skip 2 --launch-count 1 -f -o $out/ncu_${who}_$row \
    python3 bench/ncu_prefill.py --lib $B/libflashserve_c.so --row $row --peer $who > $out/ncu_${who}_$row.run.log 2>&1
  echo "$(el) ncu $who row $row rc $? $(tail -1 $out/ncu_${who}_$row.run.log)"
  $NCU --import $out/ncu_${who}_$row.ncu-rep --page details > $out/ncu_${who}_$row.details.txt 2>&1
  grep -E "^  [a-z_A-Z].*\(|Duration|SM Frequency|Grid Size|Block Size|Registers Per|Shared Memory Config|Dynamic Shared|Compute \(SM\) Throughput|Memory Throughput|L2 Hit|Issue Slots Busy|Executed Ipc A" \
    $out/ncu_${who}_$row.details.txt | head -16
}
prof cudnn 0 "--set full"
prof cudnn 4 "--section LaunchStats --section SpeedOfLight"
[ "${FULL:-0}" = 1 ] && prof ours 0 "--set full"
[ "${FULL:-0}" = 1 ] && prof cudnn 1 "--set full"
rm -f $out/*.ncu-rep.tmp
