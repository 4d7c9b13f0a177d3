#!/usr/bin/env bash
# Session 50 call 6 (issue 22), carry build-s46/libflashserve_c.so and .whl/fa3:
# 1. ncu of FA3's launches on rows 8, 16, 17, 3 (call 5's filter missed them: its kernel is
#    cutlass's device_kernel);
# 2. the causal section's L2 budget on the short causal rows, where call 5's ncu read DRAM bytes
#    well past the compulsory 258 MB (d 64 16x1k causal 376 MB, L2 hit 48%, cuDNN 262 MB; d 64 4x4k
#    causal 505; d 128 4x4k causal 410): the default 32 MB of K/V a section, against 2-16 MB
#    (smaller sections: more K/V reuse in the H100's 50 MB beside Q and O; the LPT order spans
#    fewer pairs). Prediction: 16x1k causal +2-5% at 4-8 MB, the 4x4k rows +0-3%.
B=${B:-build-s46}
source bench/results/call_prologue.sh
set +e
ONLY_FA3=1 bash bench/results/session50/call_ncu.sh
ab l2short 6 18,1,16,3,21,24,27,34 mb2=FLASHSERVE_PREFILL_WS_L2_MB=2 mb4=FLASHSERVE_PREFILL_WS_L2_MB=4 \
  mb8=FLASHSERVE_PREFILL_WS_L2_MB=8 mb16=FLASHSERVE_PREFILL_WS_L2_MB=16
python3 bench/ab_paired.py "$out/ab_l2short.log" 2>&1 | tail -10
pack_out
