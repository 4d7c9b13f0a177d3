#!/usr/bin/env bash
# Session 32 call 8: (issue 27) the server's new CUDA defaults, 8192 tokens a step and 2048 prompt
# tokens beside decodes, and the overlapped steps (session 30, never run on a GPU), by the GPU
# part of tests/server_flags_test.sh; (issue 22) the d 64 rows of bench_prefill beside cuDNN,
# torch's flash and FA3 (the plain run, d 64 only, landed this session).
# Carry build-gpu/pack (with libflashserve_c.so), .whl/fa3.
P=build-gpu/pack
LIBS="$PWD/$P/lib"; B=$P
source bench/results/call_prologue.sh
timeout 240 bash tests/server_flags_test.sh $P/server/flashserve_server cuda > "$out/flags.log" 2>&1
echo "$(el) flags rc $?"; tail -4 "$out/flags.log"
source scripts/gpu_peers.sh install
set +e
timeout 280 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --quick --dims 64 --no-extra --rounds 3 \
  > "$out/bench_prefill_d64.log" 2>&1
echo "$(el) bench d64 rc $?"; tail -n 20 "$out/bench_prefill_d64.log"
