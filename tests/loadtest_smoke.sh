#!/usr/bin/env bash
# The load-test client against a real CPU server: a smoke load (tens of requests) where every
# request must succeed and the token totals match what the server counted, then a server with a
# one-request queue where the rejected requests are counted as failures by status code (over gRPC
# and over the HTTP front), a refused connection, and, on SmolLM2 (a tokenizer: text in the
# stream) when the model cache has it, --backend openai and openai-chat against the same loads
# over gRPC: same token counts, the server's counts, a wrong token's 401.
set -u
server=$1 bench=$2
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
start_server() {  # sets pid, port, mport, hport (with http=0)
  log=$(mktemp)
  "$server" --port 0 --metrics-port 0 --http-port "${http:--1}" "$@" >"$log" 2>/dev/null &
  pid=$!
  for _ in $(seq 300); do
    grep -q '^ready$' "$log" && break
    sleep 0.1
  done
  port=$(grep -oE 'listening on 127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
  mport=$(grep -oE 'metrics on http://127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
  hport=$(grep -oE 'http on https?://127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
}
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }
scrape() { exec 3<>/dev/tcp/127.0.0.1/"$1" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3; }
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
metrics=$(scrape "$mport")
check "the client's token count is the server's (240)" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"total_output_tokens\"]==240" "$json" && echo "$metrics" | grep -q "^vllm:generation_tokens_total 240"'
check "/metrics: the step thread's time by phase, the forward pass the largest, begin_step within it; 8 steps or more" \
  'echo "$metrics" | python3 -c "
import re, sys
t = sys.stdin.read()
ph = {m[0]: float(m[1]) for m in re.findall(r\"^flashserve:step_seconds_total\\{phase=.(\\w+).\\} (\\S+)\", t, re.M)}
steps = float(re.search(r\"^flashserve:steps_total (\\S+)\", t, re.M).group(1))
assert set(ph) == {\"schedule\", \"build\", \"forward\", \"deliver\"}, ph
assert ph[\"forward\"] > 0 and ph[\"forward\"] == max(ph.values()) and steps >= 8, (ph, steps)
begin = float(re.search(r\"^flashserve:step_begin_seconds_total (\\S+)\", t, re.M).group(1))
assert 0 < begin <= ph[\"forward\"], (begin, ph)
"'
"$bench" --target "127.0.0.1:$port" --num-prompts 5 --input-len 8 --output-len 4 --report "$html" --no-progress >/dev/null
check "--report FILE.html: a page around the SVG" 'grep -q "<svg" "$html" && grep -q "<html>" "$html"' 
kill -TERM "$pid"; wait "$pid"

# Overlapped steps (--overlap-steps, issue 27): the same load, every request whole, the server's
# token count the client's, and /metrics saying the steps were overlapped.
start_server --overlap-steps
"$bench" --target "127.0.0.1:$port" --num-prompts 30 --input-len 48 --output-len 8 --ignore-eos \
  --request-rate 100 --max-concurrency 8 --result-json "$json" --no-progress >/dev/null
rc=$?
metrics=$(scrape "$mport")
check "--overlap-steps: 30 completed, none failed, 240 tokens as the server counted (rc $rc)" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"completed\"]==30 and d[\"failed\"]==0 and d[\"total_output_tokens\"]==240" "$json" && echo "$metrics" | grep -q "^vllm:generation_tokens_total 240"'
check "--overlap-steps: /metrics flashserve:overlap_steps 1" 'echo "$metrics" | grep -q "^flashserve:overlap_steps 1"'
kill -TERM "$pid"; wait "$pid"

http=0 start_server --max-num-seqs 1 --max-waiting 1
"$bench" --target "127.0.0.1:$port" --num-prompts 20 --input-len 16 --output-len 200 --ignore-eos \
  --result-json "$json" --no-progress >/dev/null
rc=$?
check "a full queue: the client exits 3" '[ "$rc" -eq 3 ]'
check "rejections counted as failures" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"failed\"]>0 and d[\"completed\"]+d[\"failed\"]==20" "$json"'
# The same over the HTTP front (synthetic weights have no tokenizer: --vocab-size, no text).
out=$("$bench" --backend openai --base-url "http://127.0.0.1:$hport" --vocab-size 100 --num-prompts 20 --input-len 16 \
  --output-len 200 --ignore-eos --result-json "$json" --no-progress 2>&1)
rc=$?
check "openai, a full queue: exit 3, 429s counted with the server's message" \
  '[ "$rc" -eq 3 ] && echo "$out" | grep -qE "failed with HTTP status 429: +[1-9]" && echo "$out" | grep -q "first: HTTP 429: ."'
check "openai, a full queue: completed + failed = 20, some completed" \
  'python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert d[\"failed\"]>0 and d[\"completed\"]>0 and d[\"completed\"]+d[\"failed\"]==20" "$json"'
kill -TERM "$pid"; wait "$pid"
out=$("$bench" --backend openai --base-url "http://127.0.0.1:$hport" --model m --vocab-size 100 --num-prompts 3 \
  --input-len 4 --output-len 4 --no-progress 2>&1)
rc=$?
check "openai, nobody listening: 3 failed without a response, exit 3" \
  '[ "$rc" -eq 3 ] && echo "$out" | grep -qE "failed with no response: +3" && echo "$out" | grep -q "could not connect"'
out=$("$bench" --backend openai --base-url "http://127.0.0.1:$hport" --num-prompts 3 --no-progress 2>&1)
rc=$?
check "openai, nobody listening for /v1/models: exit 1 with the reason" '[ "$rc" -eq 1 ] && echo "$out" | grep -q "GET http.*/v1/models: could not connect"'
start=$(date +%s.%N)
out=$("$bench" --target "127.0.0.1:$port" --vocab-size 100 --num-prompts 3 --connect-timeout 1 --no-progress 2>&1)
rc=$?
took=$(python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$start" "$(date +%s.%N)")
check "grpc, nobody listening: exit 1 after --connect-timeout 1 with the reason (${took} s)" \
  '[ "$rc" -eq 1 ] && echo "$out" | grep -q "no connection to 127.0.0.1:$port in 1 s: .*connect" && python3 -c "assert 0.9 < $took < 5"'

# HTTPS: the server's --tls-cert/--tls-key serve the HTTP front too; the client verifies it with
# --tls-ca, and without it (the system's CAs) refuses the self-signed certificate.
if command -v openssl >/dev/null; then
  tdir=$(mktemp -d)
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$tdir/k.pem" -out "$tdir/c.pem" -days 1 -subj /CN=127.0.0.1 \
    -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
  http=0 start_server --tls-cert "$tdir/c.pem" --tls-key "$tdir/k.pem"
  out=$("$bench" --backend openai --base-url "https://127.0.0.1:$hport" --tls-ca "$tdir/c.pem" --vocab-size 100 \
    --num-prompts 6 --input-len 8 --output-len 5 --ignore-eos --result-json "$json" --no-progress 2>&1)
  rc=$?
  check "openai over HTTPS with --tls-ca: exit 0, 6 completed, 30 tokens out" \
    '[ "$rc" -eq 0 ] && [ "$(field "$json" completed)" = 6 ] && [ "$(field "$json" total_output_tokens)" = 30 ]'
  out=$("$bench" --backend openai --base-url "https://127.0.0.1:$hport" --model m --vocab-size 100 --num-prompts 2 \
    --input-len 4 --output-len 2 --no-progress 2>&1)
  rc=$?
  check "openai over HTTPS without --tls-ca: the self-signed certificate refused, 2 failed, exit 3" \
    '[ "$rc" -eq 3 ] && echo "$out" | grep -qE "failed with no response: +2" && echo "$out" | grep -q "not verified"'
  out=$("$bench" --backend openai --base-url "https://127.0.0.1:$hport" --tls-ca "$tdir/missing.pem" --model m \
    --vocab-size 100 --num-prompts 1 --no-progress 2>&1)
  rc=$?
  check "openai, an unreadable --tls-ca: exit 1 naming it" '[ "$rc" -ne 0 ] && [ "$rc" -ne 3 ] && echo "$out" | grep -q "missing.pem"'
  out=$("$bench" --target "127.0.0.1:$port" --tls-ca "$tdir/c.pem" --vocab-size 100 --num-prompts 3 --input-len 8 \
    --output-len 5 --ignore-eos --result-json "$json" --no-progress 2>&1)
  rc=$?
  check "grpc over TLS with --tls-ca: exit 0, 3 completed" '[ "$rc" -eq 0 ] && [ "$(field "$json" completed)" = 3 ]'
  out=$("$bench" --target "127.0.0.1:$port" --vocab-size 100 --num-prompts 1 --connect-timeout 1 --no-progress 2>&1)
  rc=$?
  check "grpc in plain text to a TLS server: exit 1, no connection, with the reason" \
    '[ "$rc" -eq 1 ] && echo "$out" | grep -q "no connection to 127.0.0.1:$port in 1 s: ."'
  kill -TERM "$pid"; wait "$pid"
  rm -rf "$tdir"
else
  echo "skipped: the HTTPS part (no openssl binary)"
fi

# The HTTP front on SmolLM2: the same random load over gRPC and /v1/completions (token ids, the
# same seed: the same prompts), then /v1/chat/completions; a token required.
model="${FLASHSERVE_MODEL_DIR:-$HOME/.cache/flashserve/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$model" ]; then
  gjson=$(mktemp) ojson=$(mktemp)
  FLASHSERVE_AUTH_TOKEN=sekrit http=0 start_server --model "$model"
  load=(--num-prompts 12 --input-len 24 --output-len 8 --ignore-eos --max-concurrency 4 --seed 5 --auth-token sekrit
        --no-progress --save-detailed)
  "$bench" --target "127.0.0.1:$port" "${load[@]}" --result-json "$gjson" >/dev/null
  grc=$?
  before=$(scrape "$hport" | grep -oP '^vllm:generation_tokens_total \K[0-9]+')
  "$bench" --backend openai --base-url "http://127.0.0.1:$hport" "${load[@]}" --result-json "$ojson" >/dev/null
  orc=$?
  after=$(scrape "$hport" | grep -oP '^vllm:generation_tokens_total \K[0-9]+')
  check "SmolLM2: gRPC and openai backends exit 0" '[ "$grc" -eq 0 ] && [ "$orc" -eq 0 ]'
  check "openai: 12 completed, 96 tokens out (the usage chunks), 288 in" \
    '[ "$(field "$ojson" completed)" = 12 ] && [ "$(field "$ojson" total_output_tokens)" = 96 ] && [ "$(field "$ojson" total_input_tokens)" = 288 ]'
  check "openai: the server counted the same 96 tokens (/metrics on the HTTP port)" '[ $((after - before)) -eq 96 ]'
  check "openai and gRPC: the same per-request input and output lengths" \
    'python3 -c "import json,sys; g,o=(json.load(open(f)) for f in sys.argv[1:]); assert g[\"input_lens\"]==o[\"input_lens\"] and g[\"output_lens\"]==o[\"output_lens\"]==[8]*12" "$gjson" "$ojson"'
  check "openai: TTFTs and 7 ITLs a request measured" \
    'python3 -c "import json,sys; o=json.load(open(sys.argv[1])); assert all(t>0 for t in o[\"ttfts\"]) and sum(len(i) for i in o[\"itls\"])>=12*5" "$ojson"'
  "$bench" --backend openai-chat --port "$hport" --num-prompts 4 --input-len 24 --output-len 8 --ignore-eos \
    --auth-token sekrit --no-progress --save-detailed --result-json "$ojson" >/dev/null
  orc=$?
  check "openai-chat: 4 completed, 32 tokens out, the chat template's tokens in (more than 24 a prompt)" \
    '[ "$orc" -eq 0 ] && [ "$(field "$ojson" total_output_tokens)" = 32 ] && python3 -c "import json,sys; o=json.load(open(sys.argv[1])); assert all(n>24 for n in o[\"input_lens\"]), o[\"input_lens\"]" "$ojson"'
  out=$("$bench" --backend openai --port "$hport" --model "$model" --vocab-size 1000 --num-prompts 2 --input-len 4 \
    --output-len 2 --auth-token wrong --no-progress 2>&1)
  rc=$?
  check "openai, a wrong token: 2 failed with HTTP 401, exit 3" '[ "$rc" -eq 3 ] && echo "$out" | grep -qE "failed with HTTP status 401: +2"'
  kill -TERM "$pid"; wait "$pid"
  rm -f "$gjson" "$ojson"
else
  echo "skipped: the SmolLM2 part ($model is absent)"
fi
rm -f "$json" "$svg" "$html"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
