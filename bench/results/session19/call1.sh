#!/usr/bin/env bash
# Session 19 call 1: the d 64 192x192 tile (FLASHSERVE_PREFILL_WS_BLOCK_N=192) tested and A/B'd,
# ws against v3 at d 64 16x1k, then ncu (full set, SASS source) of ours and FA3 on d128 1x16k and 16x1k.
set -uo pipefail
export LD_LIBRARY_PATH="/usr/local/cuda/lib64" PYTHONUNBUFFERED=1
out=${OUT:-/tmp/o}; mkdir -p $out
B=build-g19
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
step=${1:-all}
if [[ $step == all || $step == test ]]; then
  $B/tests/test_prefill_cuda --gtest_brief=1 > $out/test_prefill.log 2>&1; echo "prefill rc $? $(grep -E '^\[  (PASSED|FAILED) ' $out/test_prefill.log | tr '\n' ' ')"
  grep -E "Failure|FAILED|kernel" $out/test_prefill.log | head -8
fi
if [[ $step == all || $step == ab ]]; then
  timeout 200 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --only 7,18,15,16,17,8,4,0 \
    --config n192=FLASHSERVE_PREFILL_WS_BLOCK_N=192 --config ws=FLASHSERVE_PREFILL_KERNEL=ws \
    --config ws192=FLASHSERVE_PREFILL_KERNEL=ws,FLASHSERVE_PREFILL_WS_BLOCK_N=192 2>&1 | tee $out/ab_d64.log
fi
if [[ $step == all || $step == ncu ]]; then
  source scripts/gpu_peers.sh install >/dev/null 2>&1
  NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
  for spec in ours:4 ours:0 fa3:4 fa3:0; do
    who=${spec%%:*}; row=${spec#*:}
    k="regex:prefill_sm90_ws"; [ $who = fa3 ] && k="regex:FlashAttnFwd"
    timeout 150 $NCU --clock-control none --set full --import-source yes --kernel-name-base demangled -k "$k" \
      --launch-skip 2 --launch-count 1 -f -o $out/ncu_${who}_$row python3 bench/ncu_prefill.py --lib $B/libflashserve_c.so \
      --row $row --peer $who > $out/ncu_${who}_$row.run.log 2>&1
    echo "ncu $who row $row rc $? $(tail -1 $out/ncu_${who}_$row.run.log)"
    $NCU --import $out/ncu_${who}_$row.ncu-rep --page details > $out/ncu_${who}_$row.details.txt 2>&1
    $NCU --import $out/ncu_${who}_$row.ncu-rep --page source --print-source sass --csv > $out/ncu_${who}_$row.sass.csv 2>&1
    grep -E "Duration|SM Frequency|Executed Ipc A|Issue Slots Busy|Registers Per|No Eligible|Warp Cycles Per Issued" $out/ncu_${who}_$row.details.txt | head -9
  done
fi
