#!/usr/bin/env bash
# The embedded default as a user meets it: the server on SmolLM2-135M-Instruct (the GGUF that
# setup puts into the model cache) answers a chat message in English through the CLI, streams
# a text prompt, honours a stop string, and tokenizes. Reports "skipped" when the model file
# is absent. Prints "N passed, N failed".
set -u
server=$1 cli=$2 bench=${3:-}
model="${FLASHSERVE_MODEL_DIR:-$HOME/.cache/flashserve/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ ! -f "$model" ]; then
  echo "skipped: $model is absent (scripts/fetch_model.sh puts it there)"
  exit 0
fi
log=$(mktemp)
"$server" --model "$model" --port 0 --metrics-port -1 --http-port -1 >"$log" 2>&1 &
pid=$!
port=""
for _ in $(seq 600); do
  port=$(grep -oE 'listening on 127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
  [ -n "$port" ] && grep -q '^ready$' "$log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
passed=0 failed=0
check() { if eval "$2"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $1"; fi; }
check "the server loads SmolLM2 and is ready" 'grep -q "^ready$" "$log"'
chat=$("$cli" --target "127.0.0.1:$port" --chat "What is the capital of France?" --max-tokens 24 2>&1)
echo "chat: $chat"
check "a chat message gets an English answer naming Paris" 'echo "$chat" | grep -q "Paris"'
check "the chat ends with its eos, not the length limit" 'echo "$chat" | grep -q "FINISH_REASON_EOS"'
text=$("$cli" --target "127.0.0.1:$port" --prompt "The capital of France is" --max-tokens 8 2>&1)
echo "text: $text"
check "a text prompt streams text" 'echo "$text" | grep -q "FINISH_REASON_LENGTH\] 5 prompt, 8 completion"'
stop=$("$cli" --target "127.0.0.1:$port" --chat "What is the capital of France?" --max-tokens 24 --stop "Paris" 2>&1)
echo "stop: $stop"
check "a stop string ends the answer before it" 'echo "$stop" | grep -q "FINISH_REASON_STOP" && ! echo "$stop" | grep -q "Paris"'
info=$("$cli" --target "127.0.0.1:$port" --info 2>&1)
check "model info names the tokenizer and the gguf chat template" \
  'echo "$info" | grep -q "49152 tokens" && echo "$info" | grep -q "chat_template_source: \"gguf\""'
if [ -n "$bench" ]; then  # the load client's jsonl dataset with text prompts, tokenized by the server
  data=$(mktemp --suffix .jsonl)
  printf '%s\n' '{"prompt": "The capital of France is", "output_len": 4}' '{"prompt": "Once upon a time, in a land far away,"}' >"$data"
  load=$("$bench" --target "127.0.0.1:$port" --dataset-name jsonl --dataset-path "$data" --num-prompts 4 \
    --request-rate inf --output-len 6 --ignore-eos 2>&1)
  check "flashserve_bench takes text prompts (real token counts: 5 + 11 + 5 + 11)" \
    'echo "$load" | grep -qE "Total input tokens: +32" && echo "$load" | grep -qE "Total generated tokens: +20"'
  echo "$load" | grep -E "Total input|Total generated|Failed"
  rm -f "$data"
fi
bad=$("$cli" --target "127.0.0.1:$port" --prompt "$(printf 'bad \xff text')" 2>&1)
check "text that is not UTF-8 is INVALID_ARGUMENT" 'echo "$bad" | grep -q "error 3"'
kill -TERM "$pid"
wait "$pid"
rc=$?
check "SIGTERM: exit 0" '[ "$rc" -eq 0 ]'
[ "$failed" -eq 0 ] || tail -20 "$log"
rm -f "$log"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
