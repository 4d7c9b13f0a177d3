#!/usr/bin/env bash
# Next session's calls (issue 22), two while the machine is warm (together they can pass a call's
# 600 s):
#   1. bash bench/results/session46/call5.sh, carry build-s46 (prep5.sh): not run in session 46
#      (the device time ran out);
#   2. this script, carry build-s46/libflashserve_c.so and .whl (scripts/gpu_peers.sh prepare,
#      prepare-flashinfer): v4.35 beside cuDNN, FA3 and FlashInfer at d 128 (call2.sh's table; the
#      key tile rule moved 4x4k and the skew non-causal to 128 keys).
B=build-s46 DIMS=128 bash bench/results/session46/call2.sh
