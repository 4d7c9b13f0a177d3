#!/usr/bin/env bash
# End-to-end serving on the GPU machine: each server given runs synthetic:llama3-8b on the GPU
# (bf16 weights made on the device), and the bundled client load-tests it at concurrency 1 and
# 64 (CONCURRENCY) with random token prompts; a table of the client's numbers, then one of the step thread's time
# a step by phase over each load (schedule, build, forward, deliver: /metrics' step counters
# scraped after each load, scripts/step_phases.py; issue 27's host share of a step). The servers run one after
# another in the order given (give one twice to see the spread between runs).
# Usage: OUT=DIR LIBS=DIR gpu_serve_check.sh BENCH NAME=SERVER[,ARG...] ...
#   BENCH: the flashserve_bench binary; ARGs: extra server flags, comma-separated (e.g.
#   after=build-gpu/server/flashserve_server,--num-blocks,8192). LIBS: a folder of the shared
#   libraries the binaries need that the machine lacks (gRPC, Protobuf, Abseil, ...; see
#   scripts/gpu_serve_pack.sh), put first on LD_LIBRARY_PATH.
# Environment: IN (input tokens, 512), OUTLEN (output tokens, 128), CONCURRENCY (the loads, "1
# 64"), N1 (prompts at concurrency 1, 16), N64 (prompts at concurrency 64, 256), other
# concurrencies 4x theirs.
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-/tmp/flashserve-gpu}"
mkdir -p "$out"
export LD_LIBRARY_PATH="${LIBS:+$LIBS:}/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bench=$1
shift
in=${IN:-512} outlen=${OUTLEN:-128} n1=${N1:-16} n64=${N64:-256}
status=0
run=0
rows=()
phases=()
for spec in "$@"; do
  run=$((run + 1))
  name=${spec%%=*}
  IFS=, read -r -a argv <<<"${spec#*=}"
  server=${argv[0]}
  log="$out/serve_${run}_$name"
  port=$((18000 + run)) mport=$((18100 + run))
  "$server" --device cuda --model synthetic:llama3-8b --port "$port" --metrics-port "$mport" --http-port -1 "${argv[@]:1}" \
    >"$log.out" 2>"$log.err" &
  pid=$!
  for _ in $(seq 3600); do  # 180 s
    grep -q '^ready$' "$log.out" && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  if ! grep -q '^ready$' "$log.out"; then
    echo "$name: the server did not come up; its log:"
    tail -n 20 "$log.err"
    kill -9 "$pid" 2>/dev/null
    status=1
    continue
  fi
  grep -m1 "KV cache" "$log.err"
  grep -m1 "decode graphs" "$log.err"
  for c in ${CONCURRENCY:-1 64}; do
    case $c in 1) n=$n1;; 64) n=$n64;; *) n=$((4 * c));; esac
    "$bench" --target "127.0.0.1:$port" --request-rate inf --max-concurrency "$c" --num-prompts "$n" \
      --input-len "$in" --output-len "$outlen" --ignore-eos --num-warmups 2 --seed 0 --no-progress \
      --percentile-metrics ttft,tpot,itl --metric-percentiles 50,99 --result-json "$log.c$c.json" \
      >"$log.c$c.txt" 2>&1 || { status=1; echo "$name c=$c: the client failed"; tail -n 5 "$log.c$c.txt"; }
    # The step thread's time by phase over this load (issue 27: the host's share of a step), from
    # /metrics before and after: schedule, build, forward, deliver per step, in microseconds; and
    # the device's view of a step (the CUDA model's events): idle between steps, prepare (the
    # step's host work and upload), run (kernels, draws, tokens back).
    after=$( (exec 3<>/dev/tcp/127.0.0.1/"$mport" && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3) 2>/dev/null |
      grep -E '^flashserve:(step_seconds_total|step_begin_seconds_total|steps_total|step_device_seconds_total|device_timed_steps_total)')
    echo "$after" >"$log.c$c.metrics"
    phases+=("$(python3 scripts/step_phases.py "$name" "$c" "$log.c$c.metrics" "${before:-}")")
    before=$after
    rows+=("$(python3 - "$name" "$c" "$log.c$c.json" <<'EOF'
import json, sys
name, c, path = sys.argv[1:4]
try:
    r = json.load(open(path))
except Exception as e:  # noqa: BLE001
    print(f"| {name} | {c} | no result ({e}) |")
    sys.exit(0)
g = lambda k: r.get(k, float("nan"))
print(f"| {name} | {c} | {g('completed')} | {g('output_throughput'):.0f} | {g('mean_ttft_ms'):.1f} | "
      f"{g('median_ttft_ms'):.1f} | {g('mean_tpot_ms'):.2f} | {g('median_itl_ms'):.2f} | {g('p99_itl_ms'):.2f} |")
EOF
)")
  done
  kill -TERM "$pid" 2>/dev/null
  wait "$pid"
  before=""
done
echo "| server | concurrency | completed | output tok/s | mean TTFT ms | median TTFT ms | mean TPOT ms | median ITL ms | p99 ITL ms |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "| server | concurrency | steps | schedule us/step | build us/step | forward us/step | of it begin_step us | deliver us/step | device idle us | device prepare us | device run us |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${phases[@]}"
exit $status
