#!/usr/bin/env bash
# Numeric flags and their FLASHSERVE_* environment twins (issue 24, point 5): a value out of
# range, not a number, NaN or infinite is refused by name before the server listens (before:
# --port 118496 listened on 52960, --grace-period nan meant no grace, --seed -1 wrapped); values
# at the edges of the ranges are taken. Usage: server_flags_test.sh SERVER. Prints "N passed, N failed".
set -u
server=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }

# refused NAME WHAT ENV... -- ARGS...: the server must exit non-zero without listening, and say
# NAME (the flag) on stderr. The environment is set with env(1) so each case stands alone.
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
}

base=(--metrics-port -1)
for v in 118496 65536 -1 5x 80.5 ''; do refused --port "--port '$v'" -- --port "$v" --metrics-port -1; done
for v in 118496 -2; do refused --metrics-port "--metrics-port $v" -- --port 0 --metrics-port "$v"; done
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

# served ENV... -- ARGS...: starts the server, waits up to 10 s for "ready" (rc_ready 0 if it
# came), sends SIGTERM and waits; rc is its exit status, $tmp/out and $tmp/err what it wrote.
served() {
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$server" "$@" >"$tmp/out" 2>"$tmp/err" &
  local pid=$!
  for _ in $(seq 200); do
    grep -q '^ready$' "$tmp/out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  grep -q '^ready$' "$tmp/out"
  rc_ready=$?
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  rc=$?
}

# Edges of the ranges are taken: the server gets ready and a SIGTERM still exits 0.
served -- --port 0 --metrics-port 0 --grace-period 0 --num-blocks 2 --block-size 256 --max-batched-tokens 1 \
  --max-num-seqs 1 --max-waiting 1 --seed 18446744073709551615 --max-receive-bytes 2147483647
check "the ranges' edges are taken" '[ "$rc_ready" -eq 0 ]'
check "... and SIGTERM exits 0 (rc $rc)" '[ "$rc" -eq 0 ]'
check "... the receive limit is --max-receive-bytes" 'grep -q "largest request message: 2147483647 bytes" "$tmp/err"'
served FLASHSERVE_GRACE_PERIOD=2.5 FLASHSERVE_PORT=0 FLASHSERVE_MAX_RECEIVE_BYTES=1024 -- --metrics-port -1
check "FLASHSERVE_GRACE_PERIOD=2.5 and FLASHSERVE_PORT=0 are taken" '[ "$rc_ready" -eq 0 ]'
check "... the grace period is 2.5 s" 'grep -q "grace period 2.5 s" "$tmp/err"'
check "... the receive limit is FLASHSERVE_MAX_RECEIVE_BYTES" 'grep -q "largest request message: 1024 bytes" "$tmp/err"'
# By default the limit is the model's context length x 4 + 64 KiB (synthetic:tiny: 4096 positions).
served -- --port 0 --metrics-port -1
check "the default receive limit follows the context (4096 x 4 + 65536)" 'grep -q "largest request message: 81920 bytes" "$tmp/err"'
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
