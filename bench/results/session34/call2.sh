#!/usr/bin/env bash
# Session 34 call 2: which pipe the conversions share with EX2, and what follows.
#  1. tools/pipe_rates: EX2, cvt bf16x2 (F2FP pack), cvt e4m3x2, their ALU forms, alone and 1:1.
#  2. Issue 22: packalu (-DFLASHSERVE_PREFILL_WS_PACK_ALU: P packed to bf16 by integer rounding +
#     PRMT instead of F2FP, the 16-bit bf16 ws instances): its grid and skewed batches, ab against
#     main on every bf16 row, 5 passes.
#  3. Issue 25: the FP8 register path (fp8reg88) with FLASHSERVE_PREFILL_WS_FP8_DIAG=3 (e4m3 codes
#     placed as e5m2: no F2FP, the outputs wrong) against it without, and main with and without:
#     is F2FP what holds e4m3 (reg88 e4m3 452 vs e5m2 ~500 in call 1)?
#  4. ncu pipe use (ComputeWorkloadAnalysis, raw pipe metrics) of main at rows 1 (16x1k causal),
#     4 (1x16k), 29 (FP8 e4m3 2k over 30k), and cuDNN at row 1.
B=build-call2
source bench/results/call_prologue.sh
$B/tools/pipe_rates | tee "$out/pipe_rates.log"
echo "$(el) pipe_rates"
prefill_grid $B/packalu/test_prefill_cuda
timeout 150 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 \
  --only 0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28 \
  --config packalu=@$B/packalu/libflashserve_c.so > "$out/ab_packalu.log" 2>&1
echo "$(el) ab packalu rc $?"
timeout 100 python3 bench/ab_prefill.py --lib $B/libflashserve_c.so --passes 5 --only 29,30,31 \
  --config d3=FLASHSERVE_PREFILL_WS_FP8_DIAG=3 --config reg88=@$B/fp8reg88/libflashserve_c.so \
  --config reg88d3=@$B/fp8reg88/libflashserve_c.so,FLASHSERVE_PREFILL_WS_FP8_DIAG=3 > "$out/ab_fp8diag.log" 2>&1
echo "$(el) ab fp8 diag rc $?"; grep -v again "$out/ab_fp8diag.log"
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
pipes() {  # who row
  local who=$1 row=$2 k="regex:prefill_sm90_ws"
  [ $who = cudnn ] && k="regex:sdpa|fmha|fprop|flash|attn|cudnn"
  timeout 80 $NCU --clock-control none --section ComputeWorkloadAnalysis --section InstructionStats \
    --section SpeedOfLight -k "$k" --launch-skip 2 --launch-count 1 -f -o /tmp/rep_${who}_$row \
    python3 bench/ncu_prefill.py --lib $B/libflashserve_c.so --row $row --peer $who > /tmp/run_${who}_$row.log 2>&1
  echo "$(el) ncu $who row $row rc $?"
  $NCU -i /tmp/rep_${who}_$row.ncu-rep --page raw --csv 2>/dev/null | python3 -c '
import csv, sys
rows = list(csv.reader(sys.stdin))
if len(rows) >= 3:
    for name, unit, val in zip(rows[0], rows[1], rows[2]):
        if "pipe" in name or "gpu__time_duration" in name or name.startswith("smsp__inst_executed.sum"):
            print(f"{name} {unit} {val}")
' > "$out/pipes_${who}_$row.txt"
  grep -E "pct_of_peak_sustained_active|gpu__time_duration.sum" "$out/pipes_${who}_$row.txt" | grep -vE "fp64|dmma|imma" | head -40
}
pipes ours 1
pipes ours 4
pipes ours 29
pipes cudnn 1
pack_out
