#!/usr/bin/env bash
# Session 31 call 4 (issue 25), right after call 3 on the warm machine (wheels unpacked, the JIT
# cache filled): FP8 paged prefill against bf16 pages (2k over 30k, 16-token pages), then our FP8
# decode beside FA3's and FlashInfer's FP8 decode on the issue's rows (FlashInfer's FP8 decode
# never ran beside ours). Carry .whl, build-gpu/libflashserve_c.so.
source bench/results/call_prologue.sh
source scripts/gpu_peers.sh install
set +e
timeout 60 python3 bench/bench_prefill.py --lib $B/libflashserve_c.so --chunked-only --rounds 3 \
  > "$out/bench_prefill_fp8.log" 2>&1
echo "$(el) chunked rc $?"; tail -n 6 "$out/bench_prefill_fp8.log"
left=$(( ${LIMIT:-300} - ($(date +%s) - t0) ))
timeout $left python3 bench/bench_decode.py --lib $B/libflashserve_c.so --fp8 e4m3 --no-flex \
  --only "(64,8k)" --only "(128,2k)" --only "(256,1k)" --only "(1,32k)" --json "$out/bench_decode_fp8.json" \
  > "$out/bench_decode_fp8.log" 2>&1
echo "$(el) bench_decode rc $?"; tail -n 14 "$out/bench_decode_fp8.log"
