#!/usr/bin/env bash
# The server as a process: it starts, serves a generation to the CLI client, rejects a bad
# prompt with INVALID_ARGUMENT, and on SIGTERM drains and exits 0. Prints "N passed, N failed".
set -u
server=$1 cli=$2
log=$(mktemp)
errlog=$(mktemp)
LOG_FORMAT=json "$server" --port 0 --metrics-port 0 --http-port -1 >"$log" 2>"$errlog" &
pid=$!
port=""
for _ in $(seq 300); do  # listening comes first; "ready" once the model is loaded
  port=$(grep -oE 'listening on 127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
  [ -n "$port" ] && grep -q '^ready$' "$log" && break
  sleep 0.1
done
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
check "the server listens" '[ -n "$port" ]'
out=$("$cli" --target "127.0.0.1:$port" --tokens 5,6,7 --max-tokens 6 2>&1)
check "a generation streams 6 tokens" 'echo "$out" | grep -q "FINISH_REASON_LENGTH\] 3 prompt, 6 completion"'
bad=$("$cli" --target "127.0.0.1:$port" --tokens 5,100000 2>&1)
check "a bad prompt is INVALID_ARGUMENT" 'echo "$bad" | grep -q "error 3"'
mport=$(grep -oE 'metrics on http://127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
metrics=$(exec 3<>/dev/tcp/127.0.0.1/"$mport" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3)
check "metrics: generation tokens counted" 'echo "$metrics" | grep -q "^vllm:generation_tokens_total 6"'
check "metrics: finished by reason" 'echo "$metrics" | grep -q "vllm:request_success_total{finished_reason=\"length\"} 1"'
kill -TERM "$pid"
wait "$pid"
rc=$?
check "SIGTERM: exit 0" '[ "$rc" -eq 0 ]'
check "LOG_FORMAT=json: every line is a JSON object naming the request" \
  'python3 -c "import json,re,sys; lines=[json.loads(l) for l in open(sys.argv[1])]; assert any(re.search(\"req-[0-9a-f]{32}\", l[\"msg\"]) for l in lines) and all(\"level\" in l for l in lines)" "$errlog"'
rm -f "$log" "$errlog"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
