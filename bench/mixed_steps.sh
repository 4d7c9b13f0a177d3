#!/usr/bin/env bash
# Mixed steps (issue 27), on the CPU server by default: one fresh server a setting (the prefill
# budget flags), the same closed-loop load through flashserve_bench over gRPC (concurrency 8, random
# prompts of INPUT_LEN tokens ± half, 64 output tokens, --ignore-eos, seed 0: new prompts arrive
# while the others decode), and after the run the server's prefill budget and step cost model
# from /metrics.
#   bench/mixed_steps.sh BUILD_DIR OUT_DIR [SETTING...]
# A SETTING is the server's extra flags in one word, commas for spaces, e.g. default,
# --max-prefill-tokens,64 or --tpot-target-ms,120 (default: default, 64, 256, 120 ms).
# env: MODEL (SmolLM2-135M Q4_1), DEVICE (cpu), INPUT_LEN (320), OUTPUT_LEN (64), NUM_PROMPTS (32),
# CONCURRENCY (8), MAX_BATCHED (1024, so that "default" lets a whole prompt into a step). Writes
# OUT_DIR/<n>.json (vLLM's keys) and OUT_DIR/<n>.metrics; prints one line a setting.
set -eu
build=$1 out=$2
shift 2
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(default --max-prefill-tokens,64 --max-prefill-tokens,256 --tpot-target-ms,120)
model=${MODEL:-$HOME/.cache/flashserve/models/SmolLM2-135M-Instruct.Q4_1.gguf}
mkdir -p "$out"
n=0
for setting in "${settings[@]}"; do
  n=$((n + 1))
  extra=()
  [ "$setting" = default ] || IFS=, read -r -a extra <<<"$setting"
  log=$(mktemp)
  "$build/server/flashserve_server" --model "$model" --device "${DEVICE:-cpu}" --port 0 --http-port -1 --metrics-port 0 \
    --max-batched-tokens "${MAX_BATCHED:-1024}" "${extra[@]}" >"$log" 2>"$out/$n.server.log" &
  server=$!
  for _ in $(seq 3000); do grep -q '^ready$' "$log" && break; sleep 0.1; done
  gport=$(grep -oE 'listening on 127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
  mport=$(grep -oE 'metrics on http://127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
  "$build/client/flashserve_bench" --backend grpc --target "127.0.0.1:$gport" --num-prompts "${NUM_PROMPTS:-32}" \
    --max-concurrency "${CONCURRENCY:-8}" --request-rate inf --input-len "${INPUT_LEN:-320}" --range-ratio 0.5 \
    --output-len "${OUTPUT_LEN:-64}" \
    --ignore-eos --seed 0 --num-warmups 2 --percentile-metrics ttft,tpot,itl,e2el --metric-percentiles 50,99 \
    --no-progress --result-json "$out/$n.json" >"$out/$n.txt"
  curl -s "http://127.0.0.1:$mport/metrics" >"$out/$n.metrics"
  kill -TERM $server
  wait $server || true
  rm -f "$log"
  python3 - "$out/$n.json" "$out/$n.metrics" "$setting" <<'PY'
import json, re, sys
d = json.load(open(sys.argv[1]))
m = open(sys.argv[2]).read()
def g(name):
    r = re.search(r'^' + re.escape(name) + r' (\S+)$', m, re.M)
    return float(r.group(1)) if r else float('nan')
coef = [g('flashserve:step_cost_seconds{term="%s"}' % t) for t in ('intercept', 'decode_token', 'prefill_token', 'decode_context_token')]
steps = g('flashserve:steps_total'); fwd = g('flashserve:step_seconds_total{phase="forward"}')
print(f"{sys.argv[3]:<26} ok {d['completed']}/{d['completed'] + d['failed']}  ttft p50 {d['median_ttft_ms']:7.1f} p99 {d['p99_ttft_ms']:7.1f}  "
      f"tpot p50 {d['median_tpot_ms']:6.1f} p99 {d['p99_tpot_ms']:6.1f}  itl p50 {d['median_itl_ms']:6.1f} p99 {d['p99_itl_ms']:6.1f} ms  "
      f"out {d['output_throughput']:6.1f} tok/s  steps {steps:.0f} (fwd {1e3 * fwd / steps:.1f} ms)  budget {g('flashserve:prefill_budget_tokens'):.0f}  "
      f"cost ms {1e3 * coef[0]:.2f} + {1e3 * coef[1]:.3f}/dec + {1e3 * coef[2]:.4f}/pre + {1e6 * coef[3]:.4f}us/ctx")
PY
done
