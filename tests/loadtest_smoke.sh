#!/usr/bin/env bash
# The load-test client against a real CPU server: a smoke load (tens of requests) where every
# request must succeed and the token totals match what the server counted, then a server with a
# one-request queue where the rejected requests are counted as failures by status code.
set -u
server=$1 bench=$2
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
start_server() {  # sets pid, port, mport
  log=$(mktemp)
  "$server" --port 0 --metrics-port 0 --http-port -1 "$@" >"$log" 2>/dev/null &
  pid=$!
  for _ in $(seq 300); do
    grep -q '^ready$' "$log" && break
    sleep 0.1
  done
  port=$(grep -oE 'listening on 127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
  mport=$(grep -oE 'metrics on http://127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
}
json=$(mktemp)
svg=$(mktemp --suffix=.svg)
html=$(mktemp --suffix=.html)

start_server
"$bench" --target "127.0.0.1:$port" --num-prompts 30 --input-len 48 --output-len 8 --ignore-eos \
  --request-rate 100 --max-concurrency 8 --result-json "$json" --report "$svg" --no-progress >/dev/null
rc=$?
check "--report FILE.svg: valid SVG with five panels" \
  'python3 -c "import sys,xml.etree.ElementTree as E; r=E.parse(sys.argv[1]).getroot(); assert r.tag.endswith(\"svg\") and len(r.findall(\".//{http://www.w3.org/2000/svg}polyline\"))==5" "$svg"'
check "smoke load: exit 0" '[ "$rc" -eq 0 ]'
check "smoke load: 30 completed, none failed" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"completed\"]==30 and d[\"failed\"]==0" "$json"'
metrics=$(exec 3<>/dev/tcp/127.0.0.1/"$mport" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3)
check "the client's token count is the server's (240)" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"total_output_tokens\"]==240" "$json" && echo "$metrics" | grep -q "^vllm:generation_tokens_total 240"'
"$bench" --target "127.0.0.1:$port" --num-prompts 5 --input-len 8 --output-len 4 --report "$html" --no-progress >/dev/null
check "--report FILE.html: a page around the SVG" 'grep -q "<svg" "$html" && grep -q "<html>" "$html"' 
kill -TERM "$pid"; wait "$pid"

start_server --max-num-seqs 1 --max-waiting 1
"$bench" --target "127.0.0.1:$port" --num-prompts 20 --input-len 16 --output-len 200 --ignore-eos \
  --result-json "$json" --no-progress >/dev/null
rc=$?
check "a full queue: the client exits 3" '[ "$rc" -eq 3 ]'
check "rejections counted as failures" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"failed\"]>0 and d[\"completed\"]+d[\"failed\"]==20" "$json"'
kill -TERM "$pid"; wait "$pid"
rm -f "$json" "$svg" "$html"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
