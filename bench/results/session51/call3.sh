#!/usr/bin/env bash
# Session 51 call 3 (issue 22), carry build-s51x (prep2.sh, run on the tree: its build, v4.37) and .whl/fa3;
# run as `tar xJf build-s51x/b.tar.xz && bash bench/results/session51/call3.sh` (~300 s):
# 1. the GPU prefill grid and skewed batches (the default now takes the 64-row tile on d 64's short
#    packed cases);
# 2. the tree against FLASHSERVE_PREFILL_WS_BLOCK_M=128 (v4.36's tile for those rows) on the rows
#    the rule moved, and 16x1k causal in 16-token pages (not moved: 128 rows, level), 6 passes;
# 3. bench_prefill at d 64 beside FA3 and cuDNN;
# 4. power_prefill on d 64's short causal rows (pJ a FLOP of the 64-row tile beside FA3 and cuDNN).
# Prediction: as call 2's A/B on the moved rows (+2..+4%, 64x300 +23%), the paged row level; pJ a
# FLOP at 16x1k causal within ~8% of cuDNN's (v4.36: +10%).
B=build-s51
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
prefill_grid $B/test_prefill_cuda
ab tree 6 18,16,7,27,45,46,32 m128=FLASHSERVE_PREFILL_WS_BLOCK_M=128
python3 bench/ab_paired.py "$out/ab_tree.log" 2>&1 | tail -9
timeout 100 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 64 --no-extra > "$out/bench_d64.log" 2>&1
echo "$(el) bench rc $?"; tail -n 8 "$out/bench_d64.log"
timeout 120 python3 bench/power_prefill.py --lib $B/libflashserve_c.so --seconds 2.5 --rounds 2 \
  --row 64,16,1024,1 --row 64,4,4096,1 > "$out/power_prefill.log" 2>&1
echo "$(el) power rc $?"; cat "$out/power_prefill.log"
pack_out
