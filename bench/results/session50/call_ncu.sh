#!/usr/bin/env bash
# Session 50 call 5 (issue 22), carry build-s46/libflashserve_c.so and .whl/fa3: where d 64's causal
# rows spend the energy FA3 does not (calls 3-4: every row at the 700 W cap; ours 1.52 / 1.84 pJ a
# FLOP against FA3's 1.39 / 1.69 at d 64 1x16k / 4x4k causal; an HBM byte ~49 pJ, an L2 byte into
# shared memory ~4). ncu (clocks as they are, caches flushed before each replay as the benchmark
# flushes the L2) of one launch each of ours and FA3 on ab_prefill rows 8 (d 64 1x16k causal),
# 16 (d 64 4x4k causal), 17 (d 64 1x16k), 3 (d 128 4x4k causal), and cuDNN on 18 (d 64 16x1k
# causal) beside ours: DRAM bytes, L2 bytes, instructions, MUFU (xu) instructions, cycles.
B=${B:-build-s46}
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
prof() {  # who row
  local who=$1 row=$2 k="regex:prefill_sm90_ws"
  [ $who = fa3 ] && k="regex:device_kernel"  # FA3's kernel: cutlass::device_kernel<flash::...FlashAttnFwdSm90...>
  [ $who = cudnn ] && k="regex:sdpa|fmha|fprop|flash|attn|cudnn"
  timeout 50 $NCU --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section InstructionStats --section ComputeWorkloadAnalysis -k "$k" --launch-skip 2 --launch-count 1 \
    -f -o /tmp/rep_${who}_$row python3 bench/ncu_prefill.py --lib $B/libflashserve_c.so --row $row --peer $who \
    > /tmp/run_${who}_$row.log 2>&1
  local rc=$?
  $NCU -i /tmp/rep_${who}_$row.ncu-rep --page raw --csv 2>/dev/null > "$out/raw_${who}_$row.csv"
  python3 - "$out/raw_${who}_$row.csv" "$who" "$row" "$rc" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    print(f"{sys.argv[2]:>6} row {sys.argv[3]:>2}: no report (rc {sys.argv[4]})"); sys.exit()
m = {n: (u, v) for n, u, v in zip(rows[0], rows[1], rows[2])}
want = ["Kernel Name", "gpu__time_duration.sum", "dram__bytes.sum.per_second", "lts__t_sector_hit_rate.pct",
        "smsp__inst_executed.sum", "sass__inst_executed_register_spilling"] + [
        f"sm__inst_executed_pipe_{p}.avg.pct_of_peak_sustained_active" for p in ("alu", "fma", "xu", "lsu", "uniform", "tensor_op_gmma")] + [
        "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", "gpc__cycles_elapsed.avg.per_second"]
print(f"{sys.argv[2]:>6} row {sys.argv[3]:>2}: " + "; ".join(f"{n.split('.')[0]} {m[n][1][:60]} {m[n][0]}" for n in want if n in m))
PY
}
if [ -n "${ONLY_FA3:-}" ]; then  # call 6: FA3's launches, which call 5's filter missed
  for row in 8 16 17 3; do prof fa3 $row; done
else
  for row in 8 16 17 3; do prof ours $row; prof fa3 $row; done
  prof ours 18; prof cudnn 18
fi
pack_out
