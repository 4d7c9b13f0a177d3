#!/usr/bin/env bash
# gRPC against the OpenAI-compatible HTTP front on the CPU server (issue 28): one server, the same
# random load (the same prompts: token ids, one seed) through flashserve_bench --backend grpc and
# --backend openai, at each request rate, in rounds whose order alternates (grpc first, then
# openai first). Each run also records the share of the machine's CPUs that other processes took
# while it ran: /proc/stat busy ticks less the server's and the client's own. A round 0 at the
# first rate, one run a backend, warms the server first (its first full batch after start-up is
# ~3x slower in TTFT) and is not a measurement. Before each run it waits (up to QUIET_WAIT_S,
# default 600) for 5 s in which the CPUs are less than 10% busy: on a shared machine, other
# people's builds otherwise take a third to a half of it.
#   bench/compare_fronts.sh BUILD_DIR OUT_DIR [ROUNDS]   (env: MODEL, INPUT_LEN, RATES)
# Writes OUT_DIR/<rate>_<backend>_r<round>.json (vLLM's keys) and prints one line a run.
set -eu
build=$1 out=$2 rounds=${3:-2}
model=${MODEL:-$HOME/.cache/flashserve/models/SmolLM2-135M-Instruct.Q4_1.gguf}
input_len=${INPUT_LEN:-128}
rates=${RATES:-"inf 4"}
mkdir -p "$out"
log=$(mktemp)
"$build/server/flashserve_server" --model "$model" --device cpu --port 0 --http-port 0 --metrics-port -1 >"$log" 2>/dev/null &
server=$!
trap 'kill -TERM $server; wait $server' EXIT
for _ in $(seq 600); do grep -q '^ready$' "$log" && break; sleep 0.1; done
gport=$(grep -oE 'listening on 127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
hport=$(grep -oE 'http on http://127.0.0.1:[0-9]+' "$log" | grep -oE '[0-9]+$')
hz=$(getconf CLK_TCK) ncpu=$(nproc)
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }  # user nice system irq softirq
own() { awk '{print $14+$15}' "/proc/$server/stat"; }         # the server's utime + stime
wait_quiet() {
  local deadline=$((SECONDS + ${QUIET_WAIT_S:-600})) a b
  while [ $SECONDS -lt $deadline ]; do
    a=$(busy); sleep 5; b=$(busy)
    [ $(((b - a) * 100 / (hz * 5 * ncpu))) -lt 10 ] && return 0
  done
  return 0  # never quiet: run anyway (the run's others_cpu_share says so)
}
run() {  # rate backend round
  local args=(--backend "$2" --num-prompts 32 --input-len "$input_len" --output-len 64 --ignore-eos --seed 0
              --num-warmups 1 --request-rate "$1" --percentile-metrics ttft,tpot,itl,e2el
              --metric-percentiles 50,99 --no-progress --result-json "$out/$1_$2_r$3.json")
  if [ "$2" = grpc ]; then args+=(--target "127.0.0.1:$gport"); else args+=(--base-url "http://127.0.0.1:$hport"); fi
  local b0 s0 t0 b1 s1 t1 client
  wait_quiet
  b0=$(busy) s0=$(own) t0=$(date +%s.%N)
  client=$( { TIMEFORMAT='%U %S'; time "$build/client/flashserve_bench" "${args[@]}" >"$out/$1_$2_r$3.txt"; } 2>&1 )
  b1=$(busy) s1=$(own) t1=$(date +%s.%N)
  python3 - "$out/$1_$2_r$3.json" "$1" "$2" "$3" "$b0" "$b1" "$s0" "$s1" "$t0" "$t1" "$hz" "$ncpu" $client <<'PY'
import json, sys
f, rate, backend, rnd = sys.argv[1:5]
b0, b1, s0, s1 = map(int, sys.argv[5:9]); t0, t1 = map(float, sys.argv[9:11]); hz, ncpu = map(int, sys.argv[11:13])
cu, cs = map(float, sys.argv[13:15])
others = max(0.0, (b1 - b0 - (s1 - s0) - (cu + cs) * hz) / (hz * ncpu * (t1 - t0)))
d = json.load(open(f))
d['others_cpu_share'] = others
d['server_cpu_s'], d['client_cpu_s'] = (s1 - s0) / hz, cu + cs  # the server's and the client's CPU time in the run
json.dump(d, open(f, 'w'), indent=2)
print(f"{rate:>4} {backend:<7} r{rnd} ok {d['completed']:>2}/{d['completed'] + d['failed']} "
      f"out {d['output_throughput']:7.1f} tok/s  ttft {d['mean_ttft_ms']:8.1f} / p99 {d['p99_ttft_ms']:8.1f}  "
      f"tpot {d['mean_tpot_ms']:6.1f}  itl {d['mean_itl_ms']:6.1f} / p50 {d['median_itl_ms']:6.1f} / p99 {d['p99_itl_ms']:6.1f} ms  "
      f"others {100 * others:4.1f}% cpu  server {d['server_cpu_s']:5.1f} s client {d['client_cpu_s']:4.1f} s cpu")
PY
}
for b in grpc openai; do run "${rates%% *}" "$b" 0; done
for r in $(seq "$rounds"); do
  order="grpc openai"; [ $((r % 2)) -eq 0 ] && order="openai grpc"
  for rate in $rates; do for b in $order; do run "$rate" "$b" "$r"; done; done
done
