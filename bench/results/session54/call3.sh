#!/usr/bin/env bash
# Session 54 call 3 (issue 22), on call 1's warm machine or a fresh one (carry build-s53w: unpacks
# to build-s53c, v4.39's library): cuDNN's d 64 short-row kernel read instruction by instruction.
# Its SDPA kernel is compiled at run time (NVRTC; the wheel holds no SASS of it), so ncu's source
# page is where its SASS can be read: the design (warpgroups, barriers, loops, exps a tile), not
# code to copy. ncu (clocks as they are) of one launch each, ours and cuDNN's, ab_prefill rows 7
# (d 64 16x1k) and 18 (d 64 16x1k causal): SourceCounters (instructions executed a SASS line,
# stall samples), WarpStateStats, InstructionStats; the source page exported as CSV (bench/ncu_sass.py
# summarizes one: the executed instructions and stall samples by opcode, the hottest lines).
B=${B:-build-s53c}
[ -d "$B" ] || tar xJf build-s53w/b.tar.xz
source bench/results/call_prologue.sh
set +e
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prof() {  # who row
  local who=$1 row=$2 k="regex:prefill_sm90_ws"
  [ $who = cudnn ] && k="regex:sdpa|fmha|fprop|flash|attn|cudnn"
  timeout 100 $NCU --clock-control none --section SourceCounters --section WarpStateStats --section InstructionStats \
    --section LaunchStats --section SpeedOfLight -k "$k" --launch-skip 2 --launch-count 1 -f -o /tmp/rep_${who}_$row \
    python3 bench/ncu_prefill.py --lib $B/libflashserve_c.so --row $row --peer $who > "$out/run_${who}_$row.log" 2>&1
  echo "$(el) $who $row rc $?"
  $NCU -i /tmp/rep_${who}_$row.ncu-rep --page source --print-source sass --csv 2>"$out/src_err_${who}_$row.log" \
    | xz -9 > "$out/sass_${who}_$row.csv.xz"
  # (an ncu without --print-source: the source page's default view)
  [ -s "$out/sass_${who}_$row.csv.xz" ] && [ "$(xz -dc "$out/sass_${who}_$row.csv.xz" | wc -l)" -gt 10 ] || \
    $NCU -i /tmp/rep_${who}_$row.ncu-rep --page source --csv 2>>"$out/src_err_${who}_$row.log" | xz -9 > "$out/sass_${who}_$row.csv.xz"
  $NCU -i /tmp/rep_${who}_$row.ncu-rep --page details --csv 2>/dev/null | xz -9 > "$out/details_${who}_$row.csv.xz"
  xz -9 -c /tmp/rep_${who}_$row.ncu-rep > "$out/rep_${who}_$row.ncu-rep.xz"  # (to export again later)
  ls -la "$out/sass_${who}_$row.csv.xz"
}
prof cudnn 7
prof cudnn 18
prof ours 7
prof ours 18
pack_out
