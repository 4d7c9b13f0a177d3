#!/usr/bin/env bash
# flashserve beside llama.cpp on the same SmolLM2-135M-Instruct.Q4_1.gguf, on this machine's CPU
# (issue 23). Not part of ctest: it builds llama.cpp once and takes a few minutes to run.
#
#   bash bench/llama_cpp_compare.sh            # build once (idempotent), then measure
#   ROUNDS=5 bash bench/llama_cpp_compare.sh   # more interleaved rounds (default 3)
#   BUILD_ONLY=1 bash bench/llama_cpp_compare.sh  # only step 1
#   NICE=-15 bash bench/llama_cpp_compare.sh   # (root) measure ahead of others' builds
#
# What it does:
#   1. A venv at ~/.cache/flashserve-llamacpp (FLASHSERVE_LLAMACPP_VENV) with llama-cpp-python
#      $LCP_VERSION built by pip from its sdist (CPU only, Release, GGML_NATIVE, no BLAS, no
#      CUDA, no AMX (see below), no mtmd/llava), its CMake build tree kept in the venv (build/); then, in that same
#      tree, from the llama.cpp the sdist vendors (vendor/llama.cpp), only the targets
#      llama-batched-bench and llama-bench. A second run sees both and builds nothing.
#   2. ROUNDS (default 3) interleaved rounds of: ours, llama.cpp. Ours: build/server/flashserve_server
#      --model <gguf> --device cpu on a free port, flashserve_bench --request-rate inf
#      --input-len 64 --output-len 64 --ignore-eos at --max-concurrency 1 (4 prompts) and 16
#      (16 prompts: one batch of 16 running together), one warmup request each; the server is
#      stopped before llama.cpp runs. llama.cpp: llama-batched-bench -npp 64 -ntg 64 -npl B -t 2
#      for B = 1 and 16 (at 16: 16 distinct 64-token prompts prefilled together, then 64 steps each decoding one
#      token for all 16 sequences: real parallel decode with 16 seq ids); as batch-1 cross-checks,
#      llama-bench -p 64 -n 64 (tg64 from an empty cache) and llama-cpp-python's Llama.generate
#      (64 random prompt ids, greedy, 64 tokens, 3 runs after a warmup).
#   3. Decode tokens/s: ours concurrency / mean TPOT (TPOT excludes the first token), llama.cpp
#      S_TG (B*64 / time of the 64 decode steps); llama-cpp-python 1 / mean time a token after
#      the first. End-to-end output tokens/s: ours output_throughput (generated tokens / bench
#      duration, prefill included), llama.cpp B*64 / (prefill + decode time). Each part waits
#      for the shared machine to go quiet and is measured again when other processes took more
#      than a little of the CPUs meanwhile (QUIET_* and TRIES below); the load average and that
#      share are recorded. Tables last: every round, then the median (and best) of the rounds
#      with the ratios.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

LCP_VERSION=0.3.36
venv="${FLASHSERVE_LLAMACPP_VENV:-$HOME/.cache/flashserve-llamacpp}"
model="${FLASHSERVE_MODEL_DIR:-$HOME/.cache/flashserve/models}/SmolLM2-135M-Instruct.Q4_1.gguf"
rounds="${ROUNDS:-3}"
threads=2
out="${OUT_DIR:-${TMPDIR:-/tmp}/llama_cpp_compare.$$}"
mkdir -p "$out"
server_bin=build/server/flashserve_server
bench_bin=build/client/flashserve_bench

[ -f "$model" ] || { echo "no $model: run scripts/setup.sh (scripts/fetch_model.sh) first" >&2; exit 1; }
[ -x "$server_bin" ] && [ -x "$bench_bin" ] || { echo "build/ lacks $server_bin or $bench_bin: run scripts/build.sh" >&2; exit 1; }

src="$venv/src/llama_cpp_python-$LCP_VERSION"
bld="$venv/build"
bb="$bld/bin/llama-batched-bench"
lb="$bld/bin/llama-bench"

# CPU only, Release, -march=native but no AMX; llama.cpp's tools/tests/examples/server off for
# pip's build (llama-common is forced on by llama-cpp-python's CMakeLists; the two tools are built
# from the same tree below). AMX off: with it (native on a Xeon with AMX, as this machine is)
# ggml's AMX Q4_1 kernel (tinygemm_kernel_amx) dies of SIGILL on `tilezero` in an OpenMP worker
# thread; an open upstream llama.cpp PR (26954) says the tile permission and config are set up
# on the main thread only. Without it llama.cpp runs its AVX-512 VNNI quantized dot products.
noamx="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
cmake_args="-DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF -DGGML_BLAS=OFF \
-DGGML_VULKAN=OFF -DGGML_METAL=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF \
-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
'-DCMAKE_C_FLAGS=$noamx' '-DCMAKE_CXX_FLAGS=$noamx'"
stamp="$venv/.flashserve-build"  # what was built: a change of version or flags builds again

have_llamacpp() {
  [ -x "$bb" ] && [ -x "$lb" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$LCP_VERSION $cmake_args" ] &&
    "$venv/bin/python" -c "import sys, llama_cpp; sys.exit(llama_cpp.__version__ != '$LCP_VERSION')" 2>/dev/null
}

# ---- 1. build once ---------------------------------------------------------------------------
if ! have_llamacpp; then
  t_build0=$(date +%s)
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv"
  "$venv/bin/pip" install -q --upgrade pip
  if [ ! -d "$src" ]; then
    mkdir -p "$venv/src"
    "$venv/bin/pip" download -q --no-deps --no-binary llama-cpp-python \
      "llama-cpp-python==$LCP_VERSION" -d "$venv/src"
    tar -xzf "$venv/src/llama_cpp_python-$LCP_VERSION.tar.gz" -C "$venv/src"
  fi
  reinstall=()  # an installed copy (other flags) is rebuilt in the kept tree, deps left alone
  "$venv/bin/python" -c "import llama_cpp" 2>/dev/null && reinstall=(--force-reinstall --no-deps)
  rm -f "$stamp"
  CMAKE_BUILD_PARALLEL_LEVEL=2 CMAKE_ARGS="$cmake_args" "$venv/bin/pip" install "${reinstall[@]}" \
    --no-binary llama-cpp-python --config-settings=build-dir="$bld" \
    --config-settings=cmake.build-type=Release "$src" \
    >"$out/pip_build.log" 2>&1 || { tail -30 "$out/pip_build.log" >&2; exit 1; }
  # The same build tree, tools switched on, only the two benchmark targets.
  cmake -S "$src" -B "$bld" -DLLAMA_BUILD_TOOLS=ON >"$out/cmake_tools.log" 2>&1
  cmake --build "$bld" --parallel 2 --target llama-batched-bench llama-bench >>"$out/cmake_tools.log"
  echo "$LCP_VERSION $cmake_args" >"$stamp"
  have_llamacpp || { echo "llama.cpp build failed: see $out/pip_build.log, $out/cmake_tools.log" >&2; exit 1; }
  echo "llama.cpp built in $(( $(date +%s) - t_build0 )) s"
fi
lcp_commit=$(git -C "$src/vendor/llama.cpp" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "llama-cpp-python $LCP_VERSION, vendored llama.cpp $lcp_commit ($("$bb" --version 2>&1 | grep -m1 version || true))"
echo "flashserve $(git -C "$repo" rev-parse --short HEAD); model $model"
[ "${BUILD_ONLY:-0}" = 1 ] && exit 0
echo "results in $out"
# Our two binaries copied once (both are self-contained): others rebuilding build/ mid-run must
# not swap what is measured between rounds.
mkdir -p "$out/bin"
cp "$server_bin" "$bench_bin" "$out/bin/"
echo "ours: $server_bin and $bench_bin of $(date -r "$server_bin" '+%F %T'), copied to $out/bin"
server_bin="$out/bin/flashserve_server" bench_bin="$out/bin/flashserve_bench"

# ---- 2. measure ------------------------------------------------------------------------------
# This machine is shared, so each part is measured like this: wait (up to QUIET_WAIT s, default
# 300) until the CPUs are at most QUIET_BUSY % busy (default 10) over 2 s; run it; count the share
# of the two CPUs that other processes took meanwhile (all busy ticks in /proc/stat less the CPU
# time of the processes measured); above QUIET_OTHERS % (default 10) move its files to shared/
# and measure it again, TRIES times at most (default 4). What others took in the try kept is in
# others.tsv and in the table: a number with a large share there is not a clean one.
stat_ticks() {  # busy and total ticks of all CPUs
  local _ u n s i w q sq st
  read -r _ u n s i w q sq st _ </proc/stat
  echo "$((u + n + s + q + sq + st)) $((u + n + s + i + w + q + sq + st))"
}
cpu_busy() {  # % of all CPUs busy over the next 2 s
  local b0 t0 b1 t1
  read -r b0 t0 < <(stat_ticks); sleep 2; read -r b1 t1 < <(stat_ticks)
  echo $(( 100 * (b1 - b0) / (t1 > t0 ? t1 - t0 : 1) ))
}
pid_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
part_own=0
prio=()  # NICE=-15 (as root): the measured processes ahead of other jobs on the machine
[ -n "${NICE:-}" ] && prio=(nice -n "$NICE")
timed() {  # command...: run it, adding its CPU time to the part's own
  /usr/bin/time -f "%U %S" -o "$out/.time" "${prio[@]}" "$@"
  part_own=$((part_own + $(tail -1 "$out/.time" | awk '{printf "%d", ($1 + $2) * 100}')))
}
part() {  # key label command...: one measured part; the command writes $out/key.*
  local key=$1 label=$2 try b deadline b0 t0 b1 t1 others f
  shift 2
  for try in $(seq 1 "${TRIES:-4}"); do
    deadline=$((SECONDS + ${QUIET_WAIT:-300}))
    while b=$(cpu_busy); [ "$b" -gt "${QUIET_BUSY:-10}" ] && [ "$SECONDS" -lt "$deadline" ]; do :; done
    part_own=0
    read -r b0 t0 < <(stat_ticks)
    "$@"
    read -r b1 t1 < <(stat_ticks)
    others=$(( 100 * (b1 - b0 - part_own) / (t1 > t0 ? t1 - t0 : 1) ))
    [ "$others" -ge 0 ] || others=0
    echo "$label, try $try: cpu ${b}% busy before; others took ${others}% of the CPUs during it; loadavg after $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/loadavg.txt"
    [ "$others" -le "${QUIET_OTHERS:-10}" ] || [ "$try" = "${TRIES:-4}" ] && break
    mkdir -p "$out/shared"
    for f in "$out/$key".*; do mv "$f" "$out/shared/${f##*/}.try$try"; done
  done
  printf '%s\t%s\n' "$key" "$others" >>"$out/others.tsv"
}

server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  server_pid=
}
trap stop_server EXIT

ours_bench() {  # key concurrency prompts port seed
  local s0
  s0=$(pid_ticks "$server_pid")
  timed "$bench_bin" --target "127.0.0.1:$4" --num-prompts "$3" --max-concurrency "$2" \
    --request-rate inf --input-len 64 --output-len 64 --ignore-eos --num-warmups 1 --seed "$5" \
    --no-progress --result-json "$out/$1.json" >"$out/$1.txt" 2>&1
  part_own=$((part_own + $(pid_ticks "$server_pid") - s0))
}
run_ours() {  # round
  local r=$1 log="$out/server_r$1.log" port=
  "${prio[@]}" "$server_bin" --model "$model" --device cpu --host 127.0.0.1 --port 0 \
    --metrics-port -1 --http-port -1 --grace-period 1 >"$log" 2>&1 &
  server_pid=$!
  for _ in $(seq 1 600); do  # listening at once, serving when the model is loaded
    if grep -q "flashserve serving" "$log"; then break; fi
    kill -0 "$server_pid" 2>/dev/null || { cat "$log" >&2; exit 1; }
    sleep 0.1
  done
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\).*/\1/p' "$log" | head -1)
  [ -n "$port" ] || { cat "$log" >&2; exit 1; }
  part "ours_r${r}_c1" "ours r$r concurrency 1" ours_bench "ours_r${r}_c1" 1 4 "$port" "$r"
  part "ours_r${r}_c16" "ours r$r concurrency 16" ours_bench "ours_r${r}_c16" 16 16 "$port" "$r"
  stop_server
}

batched_bench() {  # key B
  timed "$bb" -m "$model" -t "$threads" -tb "$threads" -c 4096 -b 2048 -ub 512 \
    -npp 64 -ntg 64 -npl "$2" --output-format jsonl >"$out/$1.jsonl" 2>"$out/$1.log"
}
llama_bench() {  # key
  timed "$lb" -m "$model" -t "$threads" -p 64 -n 64 -r 3 -o json >"$out/$1.json" 2>"$out/$1.log"
}
cat >"$out/lcpp_py.py" <<'EOF'
import json, random, sys, time
from llama_cpp import Llama
path, threads, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
llm = Llama(model_path=path, n_ctx=512, n_batch=512, n_threads=threads, n_threads_batch=threads,
            verbose=False)
rng = random.Random(seed)
runs = []
for i in range(4):  # the first is a warmup
    prompt = [rng.randrange(llm.n_vocab()) for _ in range(64)]
    t0 = time.perf_counter(); n = 0
    for tok in llm.generate(prompt, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, reset=True):
        n += 1
        if n == 1: t1 = time.perf_counter()
        if n == 64: break  # eos ignored: generate() never stops by itself
    t2 = time.perf_counter()
    if i: runs.append({"ttft": t1 - t0, "tpot": (t2 - t1) / 63, "e2e": t2 - t0})
m = lambda k: sum(x[k] for x in runs) / len(runs)
print(json.dumps({"runs": runs, "mean_ttft": m("ttft"), "mean_tpot": m("tpot"), "mean_e2e": m("e2e")}))
EOF
llama_cpp_python() {  # key seed
  timed "$venv/bin/python" "$out/lcpp_py.py" "$model" "$threads" "$2" >"$out/$1.json" 2>"$out/$1.log"
}
run_llamacpp() {  # round
  local r=$1
  part "llamacpp_r${r}_b1" "llama.cpp r$r batched-bench B=1" batched_bench "llamacpp_r${r}_b1" 1
  part "llamacpp_r${r}_b16" "llama.cpp r$r batched-bench B=16" batched_bench "llamacpp_r${r}_b16" 16
  part "llama_bench_r$r" "llama.cpp r$r llama-bench" llama_bench "llama_bench_r$r"
  part "lcpp_py_r$r" "llama-cpp-python r$r batch 1" llama_cpp_python "lcpp_py_r$r" "$r"
}

for r in $(seq 1 "$rounds"); do
  run_ours "$r"
  run_llamacpp "$r"
done
"$bb" --version >"$out/llama_version.txt" 2>&1 || true

# ---- 3. table --------------------------------------------------------------------------------
python3 - "$out" "$rounds" "${QUIET_OTHERS:-10}" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
others = dict(l.split("\t") for l in open(f"{out}/others.tsv").read().split("\n") if l)
rows = []  # (round, batch, engine, decode tok/s, e2e tok/s, ms a step, prefill or TTFT ms, others %)
for r in range(1, rounds + 1):
    for c in (1, 16):
        o = json.load(open(f"{out}/ours_r{r}_c{c}.json"))
        rows.append((r, c, "flashserve", c / (o["mean_tpot_ms"] / 1000), o["output_throughput"],
                     o["mean_tpot_ms"], o["mean_ttft_ms"], others[f"ours_r{r}_c{c}"]))
    for b in (1, 16):
        for line in open(f"{out}/llamacpp_r{r}_b{b}.jsonl"):
            if not line.startswith("{"): continue
            j = json.loads(line)
            rows.append((r, b, "llama.cpp batched-bench", j["speed_tg"], b * j["tg"] / j["t"],
                         1000 * j["t_tg"] / j["tg"], 1000 * j["t_pp"], others[f"llamacpp_r{r}_b{b}"]))
    for t in json.load(open(f"{out}/llama_bench_r{r}.json")):
        if t["n_gen"] > 0:  # tg64 from an empty cache; no e2e figure
            rows.append((r, 1, "llama-bench tg64", t["avg_ts"], float("nan"), 1000 / t["avg_ts"],
                         float("nan"), others[f"llama_bench_r{r}"]))
    p = json.load(open(f"{out}/lcpp_py_r{r}.json"))
    rows.append((r, 1, "llama-cpp-python", 1 / p["mean_tpot"], 64 / p["mean_e2e"],
                 1000 * p["mean_tpot"], 1000 * p["mean_ttft"], others[f"lcpp_py_r{r}"]))
print()
print("load:"); print(open(f"{out}/loadavg.txt").read().rstrip())
print()
print("| round | batch | engine | decode tok/s | e2e output tok/s | ms/step | prefill (llama.cpp) or mean TTFT ms | others' CPU % |")
print("|---|---|---|---|---|---|---|---|")
for r, b, e, d, t, step, pf, oth in sorted(rows, key=lambda x: (x[1], x[2], x[0])):
    print(f"| {r} | {b} | {e} | {d:.1f} | {t:.1f} | {step:.1f} | {pf:.0f} | {oth} |")
print()
clean = int(sys.argv[3])
print(f"Median of the clean rounds (others took at most {clean}% of the CPUs; all rounds where none")
print("was clean), the best clean round in brackets; ratio = ours / llama.cpp batched-bench.")
print()
print("| batch | ours decode tok/s | llama.cpp decode tok/s | ratio | ours e2e tok/s | llama.cpp e2e tok/s | ratio |")
print("|---|---|---|---|---|---|---|")
for b in (1, 16):
    def v(e, i):
        sel = [x for x in rows if x[1] == b and x[2] == e]
        return [x[i] for x in ([x for x in sel if int(x[7]) <= clean] or sel)]
    od, ld = v("flashserve", 3), v("llama.cpp batched-bench", 3)
    ot, lt = v("flashserve", 4), v("llama.cpp batched-bench", 4)
    md = statistics.median
    print(f"| {b} | {md(od):.1f} ({max(od):.1f}) | {md(ld):.1f} ({max(ld):.1f}) | {md(od)/md(ld):.2f} ({max(od)/max(ld):.2f}) "
          f"| {md(ot):.1f} ({max(ot):.1f}) | {md(lt):.1f} ({max(lt):.1f}) | {md(ot)/md(lt):.2f} ({max(ot)/max(lt):.2f}) |")
EOF
