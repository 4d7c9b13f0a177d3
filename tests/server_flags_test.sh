#!/usr/bin/env bash
# Numeric flags and their FLASHSERVE_* environment twins (issue 24, point 5): a value out of
# range, not a number, NaN or infinite is refused by name before the server listens (before:
# --port 118496 listened on 52960, --grace-period nan meant no grace, --seed -1 wrapped); values
# at the edges of the ranges are taken. The KV cache sizing flags (issue 26): bad values, two ways
# of sizing at once and --gpu-memory-utilization on the CPU refused before listening; a
# --kv-cache-memory too small for one sequence of the context refused at start-up, by name; with
# "cuda", the sizing on the GPU (below). The KV cache dtype (issue 25), then the prefill budget
# flags (issue 27): at the end. Usage: server_flags_test.sh SERVER [cuda]. Prints "N passed, N
# failed".
set -u
server=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
# (A failure prints the last server's ready status and exit code and its stderr's tail.)
check() {
  if eval "$2"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAILED: $1 (last server: ready rc ${rc_ready:-none}, exit ${rc:-none}; its stderr's tail below)"
    tail -n 5 "$tmp/err" 2>/dev/null | sed 's/^/  | /'
  fi
}

# refused NAME WHAT ENV... -- ARGS...: the server must exit non-zero without listening, and say
# NAME (the flag) on stderr, not as an unknown one. The environment is set with env(1) so each
# case stands alone.
refused() {
  local name=$1 what=$2
  shift 2
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" timeout 10 "$server" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  check "$what: refused (rc $rc)" '[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && ! grep -q "listening on" "$tmp/out"'
  check "$what: the refusal names $name" 'grep -q -- "$name" "$tmp/err"'
  check "$what: ... as a known flag" '! grep -q "not expected" "$tmp/err"'
}

base=(--metrics-port -1 --http-port -1)
ready_s=30  # (an ASan build beside the rest of CI's tests: the wait ends as soon as "ready" comes)
# served ENV... -- ARGS...: starts the server, waits up to $ready_s seconds for "ready" (rc_ready
# 0 if it came), sends SIGTERM and waits; rc is its exit status, $tmp/out and $tmp/err what it wrote.
# A server that died of SIGTERM before writing a line was signalled from outside this script (it
# signals only after the wait, and the server logs from its first moments): started once more,
# said on stdout. Session 39's ASan CI saw it twice (exit 143, stderr empty, no "ready"), with
# the rest of CI's tests beside it.
served() {
  local envs=() attempt pid
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  for attempt in 1 2; do
    env "${envs[@]}" "$server" "$@" >"$tmp/out" 2>"$tmp/err" &
    pid=$!
    for _ in $(seq $((ready_s * 20))); do
      grep -q '^ready$' "$tmp/out" && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    grep -q '^ready$' "$tmp/out"
    rc_ready=$?
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    [ "$rc_ready" -ne 0 ] && [ "$rc" -eq 143 ] && [ ! -s "$tmp/err" ] && [ "$attempt" -eq 1 ] || break
    echo "note: the server died of SIGTERM before its first line (from outside this script): started again"
  done
}

# With "cuda": the pool sized on the GPU instead (label gpu; "skipped" without one), the server
# on synthetic:llama3-8b (15 GiB of bf16 weights made on the device; its context, 131072 tokens,
# needs 8193 blocks of 2 MiB with the null block).
if [ "${2:-}" = cuda ]; then
  nvidia-smi -L >/dev/null 2>&1 || { echo "skipped: no GPU"; exit 0; }
  ready_s=120
  gpu=(--device cuda --model synthetic:llama3-8b --port 0 "${base[@]}")
  served -- "${gpu[@]}"
  blocks=$(sed -n 's/.*KV cache: \([0-9]*\) blocks of 16 tokens.*by --gpu-memory-utilization 0.9 of .*/\1/p' "$tmp/err")
  check "by default the pool is sized by --gpu-memory-utilization 0.9 (rc $rc): $(grep 'KV cache' "$tmp/err")" \
    '[ "$rc_ready" -eq 0 ] && [ "$rc" -eq 0 ] && [ "${blocks:-0}" -gt 8193 ]'
  check "steps overlapped by default on CUDA" 'grep -q "steps: overlapped (--overlap-steps" "$tmp/err"'
  check "by default on CUDA 8192 tokens a step, prompt chunks at most 2048 beside decodes" \
    'grep -q "prefill budget while decodes run: at most 2048 (--max-prefill-tokens); steps without decodes: the rest of --max-batched-tokens 8192" "$tmp/err"'
  served FLASHSERVE_GPU_MEMORY_UTILIZATION=0.5 -- "${gpu[@]}"
  half=$(sed -n 's/.*KV cache: \([0-9]*\) blocks of 16 tokens.*by --gpu-memory-utilization 0.5 of .*/\1/p' "$tmp/err")
  check "FLASHSERVE_GPU_MEMORY_UTILIZATION=0.5: fewer blocks ($half of $blocks)" \
    '[ "$rc_ready" -eq 0 ] && [ "${half:-0}" -gt 8193 ] && [ "${half:-0}" -lt "${blocks:-0}" ]'
  served -- "${gpu[@]}" --kv-cache-memory $((8193 * 2097152))
  check "--kv-cache-memory of exactly the context (rc $rc)" '[ "$rc_ready" -eq 0 ] && [ "$rc" -eq 0 ]'
  check "... 8193 blocks" 'grep -q "KV cache: 8193 blocks of 16 tokens (131072 tokens, 16.00 GiB), by --kv-cache-memory" "$tmp/err"'
  served -- "${gpu[@]}" --kv-cache-memory $((8192 * 2097152))
  check "--kv-cache-memory a block short: exits 1, never ready (rc $rc)" '[ "$rc_ready" -ne 0 ] && [ "$rc" -eq 1 ]'
  check "... and says what the context needs" 'grep -q -- "--kv-cache-memory 17179869184: .* needs 8193 blocks" "$tmp/err"'
  served -- "${gpu[@]}" --gpu-memory-utilization 0.1
  check "--gpu-memory-utilization 0.1, below the weights: exits 1 (rc $rc)" '[ "$rc_ready" -ne 0 ] && [ "$rc" -eq 1 ]'
  check "... nothing is left for the pool, and it says what holds the memory" \
    'grep -q -- "--gpu-memory-utilization 0.1 allows .* weights and buffers.*nothing is left for the KV cache" "$tmp/err"'
  served -- "${gpu[@]}" --num-blocks 1024
  check "--num-blocks 1024 on the GPU: as before" 'grep -q "KV cache: 1024 blocks of 16 tokens (16368 tokens, 2.00 GiB), by --num-blocks (bf16 pages)$" "$tmp/err"'
  # An FP8 cache on the GPU (issue 25): 1 MiB a block, twice the blocks in the same memory.
  served -- "${gpu[@]}" --num-blocks 1024 --kv-cache-dtype fp8_e4m3
  check "--kv-cache-dtype fp8_e4m3 on the GPU (rc $rc)" '[ "$rc_ready" -eq 0 ] && [ "$rc" -eq 0 ]'
  check "... 1 MiB a block" 'grep -q "KV cache: 1024 blocks of 16 tokens (16368 tokens, 1.00 GiB), by --num-blocks (fp8_e4m3 pages)$" "$tmp/err"'
  check "... scales calibrated on the first prefill" 'grep -q "KV cache scales: calibrated on each layer.s first prefill, then fixed" "$tmp/err"'
  served -- "${gpu[@]}" --kv-cache-dtype fp8_e5m2
  fp8=$(sed -n 's/.*KV cache: \([0-9]*\) blocks of 16 tokens.*by --gpu-memory-utilization 0.9 of .*/\1/p' "$tmp/err")
  # (within 0.5%: two processes see a few MiB of free memory apart)
  check "fp8_e5m2 by --gpu-memory-utilization 0.9: twice the bf16 blocks ($fp8 against $blocks)" \
    '[ "$rc_ready" -eq 0 ] && [ "${fp8:-0}" -gt 8193 ] && [ $((200 * ${fp8:-0})) -ge $((399 * ${blocks:-1})) ] && [ $((200 * ${fp8:-0})) -le $((401 * ${blocks:-0})) ]'
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
  exit
fi

for v in 118496 65536 -1 5x 80.5 ''; do refused --port "--port '$v'" -- --port "$v" --metrics-port -1; done
for v in 118496 -2; do refused --metrics-port "--metrics-port $v" -- --port 0 --metrics-port "$v"; done
for v in 65536 -2 x; do refused --http-port "--http-port $v" -- --port 0 --metrics-port -1 --http-port "$v"; done
refused --http-port "FLASHSERVE_HTTP_PORT=70000" FLASHSERVE_HTTP_PORT=70000 -- --port 0 --metrics-port -1
for v in -1 65537 x; do refused --http-threads "--http-threads $v" -- --port 0 --metrics-port -1 --http-port 0 --http-threads "$v"; done
for v in nan NaN -1 -0.5 inf 1e300 x; do refused --grace-period "--grace-period $v" -- --port 0 "${base[@]}" --grace-period "$v"; done
for v in 1 0 99999999999; do refused --num-blocks "--num-blocks $v" -- --port 0 "${base[@]}" --num-blocks "$v"; done
for v in 0 3 512 -16; do refused --block-size "--block-size $v" -- --port 0 "${base[@]}" --block-size "$v"; done
for f in --max-batched-tokens --max-num-seqs --max-waiting; do
  for v in 0 -5 4294967296; do refused "$f" "$f $v" -- --port 0 "${base[@]}" "$f" "$v"; done
done
for v in 0 1023 2147483648 -5 x; do refused --max-receive-bytes "--max-receive-bytes $v" -- --port 0 "${base[@]}" --max-receive-bytes "$v"; done
for v in -1 18446744073709551616; do refused --seed "--seed $v" -- --port 0 "${base[@]}" --seed "$v"; done

# The environment twins: the same checks, the same refusals.
refused --port "FLASHSERVE_PORT=118496" FLASHSERVE_PORT=118496 -- "${base[@]}"
refused --metrics-port "FLASHSERVE_METRICS_PORT=70000" FLASHSERVE_METRICS_PORT=70000 -- --port 0
refused --grace-period "FLASHSERVE_GRACE_PERIOD=nan" FLASHSERVE_GRACE_PERIOD=nan -- --port 0 "${base[@]}"
refused --grace-period "FLASHSERVE_GRACE_PERIOD=-1" FLASHSERVE_GRACE_PERIOD=-1 -- --port 0 "${base[@]}"
refused --num-blocks "FLASHSERVE_NUM_BLOCKS=1" FLASHSERVE_NUM_BLOCKS=1 -- --port 0 "${base[@]}"
refused --block-size "FLASHSERVE_BLOCK_SIZE=3" FLASHSERVE_BLOCK_SIZE=3 -- --port 0 "${base[@]}"
refused --max-batched-tokens "FLASHSERVE_MAX_BATCHED_TOKENS=0" FLASHSERVE_MAX_BATCHED_TOKENS=0 -- --port 0 "${base[@]}"
refused --max-num-seqs "FLASHSERVE_MAX_NUM_SEQS=0" FLASHSERVE_MAX_NUM_SEQS=0 -- --port 0 "${base[@]}"
refused --max-waiting "FLASHSERVE_MAX_WAITING=0" FLASHSERVE_MAX_WAITING=0 -- --port 0 "${base[@]}"
refused --seed "FLASHSERVE_SEED=-1" FLASHSERVE_SEED=-1 -- --port 0 "${base[@]}"
refused --max-receive-bytes "FLASHSERVE_MAX_RECEIVE_BYTES=0" FLASHSERVE_MAX_RECEIVE_BYTES=0 -- --port 0 "${base[@]}"

# KV cache sizing: --gpu-memory-utilization in (0, 1], --kv-cache-memory a positive byte count,
# each with its twin; at most one of them and --num-blocks (flag or twin); the utilization is
# for --device cuda (these are all refused before anything looks for a GPU).
for v in 0 -0 -0.5 1.5 1.0000001 nan inf 0.5x ''; do
  refused --gpu-memory-utilization "--gpu-memory-utilization '$v'" -- --port 0 "${base[@]}" --device cuda --gpu-memory-utilization "$v"
done
for v in 0 -5 9223372036854775808 1e9 x; do refused --kv-cache-memory "--kv-cache-memory $v" -- --port 0 "${base[@]}" --kv-cache-memory "$v"; done
refused --gpu-memory-utilization "FLASHSERVE_GPU_MEMORY_UTILIZATION=nan" FLASHSERVE_GPU_MEMORY_UTILIZATION=nan -- --port 0 "${base[@]}" --device cuda
refused --kv-cache-memory "FLASHSERVE_KV_CACHE_MEMORY=0" FLASHSERVE_KV_CACHE_MEMORY=0 -- --port 0 "${base[@]}"
refused --kv-cache-memory "--kv-cache-memory with --num-blocks" -- --port 0 "${base[@]}" --num-blocks 64 --kv-cache-memory 100000000
refused --gpu-memory-utilization "--gpu-memory-utilization with --num-blocks" -- --port 0 "${base[@]}" --device cuda --num-blocks 64 --gpu-memory-utilization 0.5
refused --gpu-memory-utilization "--gpu-memory-utilization with --kv-cache-memory" -- --port 0 "${base[@]}" --device cuda --kv-cache-memory 100000000 --gpu-memory-utilization 0.5
refused --kv-cache-memory "FLASHSERVE_NUM_BLOCKS with --kv-cache-memory" FLASHSERVE_NUM_BLOCKS=64 -- --port 0 "${base[@]}" --kv-cache-memory 100000000
refused --gpu-memory-utilization "FLASHSERVE_KV_CACHE_MEMORY with FLASHSERVE_GPU_MEMORY_UTILIZATION" FLASHSERVE_KV_CACHE_MEMORY=100000000 FLASHSERVE_GPU_MEMORY_UTILIZATION=0.5 -- --port 0 "${base[@]}" --device cuda
refused --gpu-memory-utilization "--gpu-memory-utilization on the CPU" -- --port 0 "${base[@]}" --gpu-memory-utilization 0.5

# Edges of the ranges are taken: the server gets ready and a SIGTERM still exits 0.
served -- --port 0 --metrics-port 0 --http-port -1 --grace-period 0 --num-blocks 2 --block-size 256 --max-batched-tokens 1 \
  --max-num-seqs 1 --max-waiting 1 --seed 18446744073709551615 --max-receive-bytes 2147483647
check "the ranges' edges are taken" '[ "$rc_ready" -eq 0 ]'
check "... and SIGTERM exits 0 (rc $rc)" '[ "$rc" -eq 0 ]'
check "... the receive limit is --max-receive-bytes" 'grep -q "largest request message: 2147483647 bytes" "$tmp/err"'
served FLASHSERVE_GRACE_PERIOD=2.5 FLASHSERVE_PORT=0 FLASHSERVE_MAX_RECEIVE_BYTES=1024 -- --metrics-port -1 --http-port -1
check "FLASHSERVE_GRACE_PERIOD=2.5 and FLASHSERVE_PORT=0 are taken" '[ "$rc_ready" -eq 0 ]'
check "... the grace period is 2.5 s" 'grep -q "grace period 2.5 s" "$tmp/err"'
check "... the receive limit is FLASHSERVE_MAX_RECEIVE_BYTES" 'grep -q "largest request message: 1024 bytes" "$tmp/err"'
# The HTTP front's threads: by default one for each request the engine admits, and 64 more.
served -- --port 0 --metrics-port -1 --http-port 0
check "the HTTP front serves 64 + 1024 + 64 connections at once by default" \
  'grep -q "http: 1152 connections served at once, as many queued" "$tmp/err"'
served -- --port 0 --metrics-port -1 --http-port 0 --max-num-seqs 8 --max-waiting 10
check "... --max-num-seqs 8 --max-waiting 10: 82" 'grep -q "http: 82 connections served at once" "$tmp/err"'
served FLASHSERVE_HTTP_THREADS=5 -- --port 0 --metrics-port -1 --http-port 0
check "... FLASHSERVE_HTTP_THREADS=5: 5" 'grep -q "http: 5 connections served at once" "$tmp/err"'
# By default the limit is the model's context length x 4 + 64 KiB (synthetic:tiny: 4096 positions).
served -- --port 0 --metrics-port -1 --http-port -1
check "the default receive limit follows the context (4096 x 4 + 65536)" 'grep -q "largest request message: 81920 bytes" "$tmp/err"'
# ... and the CPU pool stays 1024 blocks (2 layers x 2 kv heads x 16 tokens x 32 x fp32, K and V: 16 KiB a block).
check "the CPU's default pool is 1024 blocks, and the log says so" \
  'grep -q "KV cache: 1024 blocks of 16 tokens (16368 tokens, 16.00 MiB), by the default --num-blocks" "$tmp/err"'
# --kv-cache-memory on the CPU: the blocks that fit; one sequence of the context (4096 tokens: 256
# blocks and the null block, 4210688 bytes) must fit, else start-up fails saying so.
served -- --port 0 "${base[@]}" --kv-cache-memory 4210687
check "--kv-cache-memory one byte short of the context: exits 1, never ready (rc $rc)" '[ "$rc_ready" -ne 0 ] && [ "$rc" -eq 1 ]'
check "... and says what the context needs" 'grep -q -- "--kv-cache-memory 4210687: a KV cache of .* needs 257 blocks" "$tmp/err"'
served -- --port 0 "${base[@]}" --kv-cache-memory 4210688
check "--kv-cache-memory of exactly the context is served (rc $rc)" '[ "$rc_ready" -eq 0 ] && [ "$rc" -eq 0 ]'
check "... the log gives its blocks and tokens" \
  'grep -q "KV cache: 257 blocks of 16 tokens (4096 tokens, 4.02 MiB), by --kv-cache-memory 4210688" "$tmp/err"'
served FLASHSERVE_KV_CACHE_MEMORY=100000000 -- --port 0 "${base[@]}"
check "FLASHSERVE_KV_CACHE_MEMORY=100000000: 6103 blocks" 'grep -q "KV cache: 6103 blocks of 16 tokens" "$tmp/err"'

# The KV cache dtype (issue 25): --kv-cache-dtype and --kv-cache-scale with their twins; a bad
# value, scales for a cache that is not FP8, and an fp16 cache on CUDA are refused before
# listening, by name. FP8 pages are one byte an element: a quarter of the CPU model's fp32 bytes,
# four times the tokens in the same --kv-cache-memory.
for v in fp8 FP8_E4M3 fp32 int8 ''; do refused --kv-cache-dtype "--kv-cache-dtype '$v'" -- --port 0 "${base[@]}" --kv-cache-dtype "$v"; done
refused --kv-cache-dtype "FLASHSERVE_KV_CACHE_DTYPE=fp4" FLASHSERVE_KV_CACHE_DTYPE=fp4 -- --port 0 "${base[@]}"
for v in 0 -1 nan inf 1e39 x 1,2,3 0.5,0 0.5, ''; do
  refused --kv-cache-scale "--kv-cache-scale '$v'" -- --port 0 "${base[@]}" --kv-cache-dtype fp8_e4m3 --kv-cache-scale "$v"
done
refused --kv-cache-scale "FLASHSERVE_KV_CACHE_SCALE=nan" FLASHSERVE_KV_CACHE_SCALE=nan -- --port 0 "${base[@]}" --kv-cache-dtype fp8_e4m3
refused --kv-cache-scale "--kv-cache-scale with the fp32 cache" -- --port 0 "${base[@]}" --kv-cache-scale 0.5
refused --kv-cache-dtype "--kv-cache-dtype fp16 on --device cuda" -- --port 0 "${base[@]}" --device cuda --kv-cache-dtype fp16
served -- --port 0 "${base[@]}" --kv-cache-dtype fp8_e4m3
check "--kv-cache-dtype fp8_e4m3 is served (rc $rc)" '[ "$rc_ready" -eq 0 ] && [ "$rc" -eq 0 ]'
check "... 1 byte an element: 4 KiB a block, the log names the pages" \
  'grep -q "KV cache: 1024 blocks of 16 tokens (16368 tokens, 4.00 MiB), by the default --num-blocks (fp8_e4m3 pages)" "$tmp/err"'
check "... scales calibrated on the first prefill" 'grep -q "KV cache scales: calibrated on each layer.s first prefill, then fixed" "$tmp/err"'
served -- --port 0 "${base[@]}" --kv-cache-dtype bf16 --kv-cache-memory 100000000
check "--kv-cache-dtype bf16 --kv-cache-memory 100000000: 12207 blocks (twice fp32's 6103)" \
  'grep -q "KV cache: 12207 blocks of 16 tokens (195296 tokens, 95.37 MiB), by --kv-cache-memory 100000000 (bf16 pages)" "$tmp/err"'
served FLASHSERVE_KV_CACHE_DTYPE=fp8_e5m2 FLASHSERVE_KV_CACHE_SCALE=0.5,0.25 -- --port 0 "${base[@]}" --kv-cache-memory 100000000
check "FLASHSERVE_KV_CACHE_DTYPE=fp8_e5m2 with --kv-cache-memory 100000000: 24414 blocks (4x fp32's)" \
  'grep -q "KV cache: 24414 blocks of 16 tokens (390608 tokens, 95.37 MiB), by --kv-cache-memory 100000000 (fp8_e5m2 pages)" "$tmp/err"'
check "... FLASHSERVE_KV_CACHE_SCALE=0.5,0.25 taken" 'grep -q "KV cache scales: --kv-cache-scale K 0.5 V 0.25" "$tmp/err"'
served -- --port 0 "${base[@]}" --kv-cache-dtype auto
check "--kv-cache-dtype auto on the CPU: fp32 pages, as before" 'grep -q "16.00 MiB), by the default --num-blocks (fp32 pages)" "$tmp/err"'
# Mixed steps (issue 27): --max-prefill-tokens (0 = no limit, the default) and --tpot-target-ms
# (0 = off, the default) with their twins; negative, NaN, infinite, not a number or too large:
# refused by name before listening. The log says which budget the steps follow.
for v in -1 -0.5 1.5 nan x 2147483648 ''; do
  refused --max-prefill-tokens "--max-prefill-tokens '$v'" -- --port 0 "${base[@]}" --max-prefill-tokens "$v"
done
for v in -1 -0.001 nan NaN inf -inf 1e7 20ms x ''; do
  refused --tpot-target-ms "--tpot-target-ms '$v'" -- --port 0 "${base[@]}" --tpot-target-ms "$v"
done
refused --max-prefill-tokens "FLASHSERVE_MAX_PREFILL_TOKENS=-1" FLASHSERVE_MAX_PREFILL_TOKENS=-1 -- --port 0 "${base[@]}"
refused --tpot-target-ms "FLASHSERVE_TPOT_TARGET_MS=nan" FLASHSERVE_TPOT_TARGET_MS=nan -- --port 0 "${base[@]}"
refused --tpot-target-ms "FLASHSERVE_TPOT_TARGET_MS=x" FLASHSERVE_TPOT_TARGET_MS=x -- --port 0 "${base[@]}"
served -- --port 0 "${base[@]}"
check "by default the prefill budget is what the decodes leave (rc $rc)" \
  'grep -q "prefill budget while decodes run: the rest of --max-batched-tokens 256 (no --max-prefill-tokens, no --tpot-target-ms); steps without decodes: the rest of --max-batched-tokens 256" "$tmp/err"'
served -- --port 0 "${base[@]}" --max-prefill-tokens 64 --max-batched-tokens 512
check "--max-prefill-tokens 64 is taken" \
  'grep -q "prefill budget while decodes run: at most 64 (--max-prefill-tokens); steps without decodes: the rest of --max-batched-tokens 512" "$tmp/err"'
served FLASHSERVE_TPOT_TARGET_MS=12.5 FLASHSERVE_MAX_PREFILL_TOKENS=128 -- --port 0 "${base[@]}" --block-size 32
check "FLASHSERVE_TPOT_TARGET_MS=12.5 and FLASHSERVE_MAX_PREFILL_TOKENS=128 are taken, the floor is one block of 32" \
  'grep -q "prefill budget while decodes run: the most prompt tokens whose predicted forward time stays <= 12.5 ms (--tpot-target-ms, a step cost model fitted on the last 256 steps), at least 32, at most 128 (--max-prefill-tokens); steps without decodes" "$tmp/err"'
served -- --port 0 "${base[@]}" --tpot-target-ms 0 --max-prefill-tokens 0
check "--tpot-target-ms 0 and --max-prefill-tokens 0 are off" 'grep -q "(no --max-prefill-tokens, no --tpot-target-ms)" "$tmp/err"'
check "steps one at a time by default on the CPU" 'grep -q "steps: one at a time (no --overlap-steps)" "$tmp/err"'
served FLASHSERVE_OVERLAP_STEPS=1 -- --port 0 "${base[@]}" --no-overlap-steps
check "--no-overlap-steps over FLASHSERVE_OVERLAP_STEPS=1: one at a time" 'grep -q "steps: one at a time (no --overlap-steps)" "$tmp/err"'
served FLASHSERVE_OVERLAP_STEPS=1 -- --port 0 "${base[@]}"
check "FLASHSERVE_OVERLAP_STEPS=1: overlapped steps" 'grep -q "steps: overlapped (--overlap-steps" "$tmp/err"'
refused --overlap-steps "FLASHSERVE_OVERLAP_STEPS=maybe" FLASHSERVE_OVERLAP_STEPS=maybe -- --port 0 "${base[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
