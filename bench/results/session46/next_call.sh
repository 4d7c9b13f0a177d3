#!/usr/bin/env bash
# Next session's first call (issue 22), carry build-s46 (prep5.sh) and .whl (scripts/gpu_peers.sh
# prepare, prepare-flashinfer; ~63 MB together): call5.sh (not run in session 46: the device time
# ran out), then v4.35 beside cuDNN, FA3 and FlashInfer at d 128 (call2.sh's table; the rows the
# key tile rule moved: 4x4k, the skew, 8x2k is not a table row).
bash bench/results/session46/call5.sh
B=build-s46 DIMS=128 bash bench/results/session46/call2.sh
