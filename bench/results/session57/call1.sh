#!/usr/bin/env bash
# Session 57 call 1 (issue 22), carry build-s56q (bench/build_pack.sh build-s56b build-s56q; the tree
# at 93d3732, whose prefill kernels are v4.40's), ~9.5 min: session 56's call 6 (the switch
# FLASHSERVE_PREFILL_WS_CAPTURED_SCHED: its tests, captured calls on the graph's own counters (ctr)
# against v4.40's zigzag static walk (graph), paired against the eager call, 4 passes; racecheck
# over CapturedCalls, 200 s), then session 54's call 3 (ncu's source page of cuDNN's d 64 short-row
# kernel beside ours, ab_prefill rows 7 and 18) with the time left.
# Prediction: ctr level with eager (within 2%), graph as session 56's call 4 (-3..-7%).
B=${B:-build-s56b}
[ -d "$B" ] || tar xJf build-s56q/b.tar.xz
source bench/results/call_prologue.sh
set +e
suite $B/test_prefill_cuda 100 captured '*Captured*'
timeout 60 python3 bench/ab_prefill.py --lib "$B/libflashserve_c.so" --passes 4 \
  --only 1,25,21,24,28,18 --config graph=GRAPH=1 --config ctr=GRAPH=1,FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=1 \
  > "$out/ab_ctr.log" 2>&1
echo "$(el) ab ctr rc $?"
python3 bench/ab_paired.py "$out/ab_ctr.log" 2>&1 | tail -8
SAN_KERNELS=prefill_sm90_ws sanitize racecheck 200 $B/test_prefill_cuda PrefillCuda.CapturedCalls race_cap
tail -3 "$out/san_race_cap.log"
# ncu (session54/call3.sh's prof, one launch each, clocks as they are), each while time is left.
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prof() {  # who row
  local who=$1 row=$2 k="regex:prefill_sm90_ws" left
  left=$(( ${DL:-585} - $(date +%s) + t0 - 15 ))
  [ $left -gt 30 ] || { echo "$(el) $who $row skipped"; return; }
  [ $who = cudnn ] && k="regex:sdpa|fmha|fprop|flash|attn|cudnn"
  timeout $(( left < 100 ? left : 100 )) $NCU --clock-control none --section SourceCounters --section WarpStateStats \
    --section InstructionStats --section LaunchStats --section SpeedOfLight -k "$k" --launch-skip 2 --launch-count 1 \
    -f -o /tmp/rep_${who}_$row python3 bench/ncu_prefill.py --lib $B/libflashserve_c.so --row $row --peer $who \
    > "$out/run_${who}_$row.log" 2>&1
  echo "$(el) $who $row rc $?"
  [ -f /tmp/rep_${who}_$row.ncu-rep ] || return
  $NCU -i /tmp/rep_${who}_$row.ncu-rep --page source --print-source sass --csv 2>"$out/src_err_${who}_$row.log" \
    | xz -9 > "$out/sass_${who}_$row.csv.xz"
  [ "$(xz -dc "$out/sass_${who}_$row.csv.xz" | wc -l)" -gt 10 ] || \
    $NCU -i /tmp/rep_${who}_$row.ncu-rep --page source --csv 2>>"$out/src_err_${who}_$row.log" | xz -9 > "$out/sass_${who}_$row.csv.xz"
  $NCU -i /tmp/rep_${who}_$row.ncu-rep --page details --csv 2>/dev/null | xz -9 > "$out/details_${who}_$row.csv.xz"
  ls -la "$out/sass_${who}_$row.csv.xz"
}
prof cudnn 18
prof ours 18
prof cudnn 7
prof ours 7
pack_out
