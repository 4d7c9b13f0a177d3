#!/usr/bin/env bash
# Session 47 call 3 (issue 22), carry build-s46/libflashserve_c.so (v4.35) and .whl (scripts/gpu_peers.sh
# prepare, prepare-flashinfer): v4.35 beside cuDNN, FA3 and FlashInfer 0.7.2 at d 128 (session 46's
# next_call.sh: the key tile rule moved 4x4k and the skew non-causal to 128 keys). Prediction:
# 4x4k non-causal from 0.91 of the best to ~0.93-0.95, the other d 128 rows as in session 46.
B=build-s46 DIMS=128 bash bench/results/session46/call2.sh
