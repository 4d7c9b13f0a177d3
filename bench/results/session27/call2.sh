#!/usr/bin/env bash
# Session 27 call 2 (issue 27), written without a GPU (this session's device loans were paused
# after one refused start): the three decode-step changes of session 27 checked, then measured.
#  1. test_skinny_gemm_cuda (kRopeAppend bit for bit against kStore + rope_append, bf16/FP8
#     pools; the one-launch residual + norm against float64; the wave split rule, host only),
#     test_model_cuda (SkinnyRopeAppendIsBitExact: logits bit for bit, bf16 and FP8 caches);
#     memcheck on the kRopeAppend tests.
#  2. bench_model --quick --steps-only (columns "skinny" = launched epilogues, "skinny-r" = with
#     rotary + append in the QKV epilogue) under: the defaults; FLASHSERVE_SKINNY_SPLIT_RULE=wave;
#     FLASHSERVE_SKINNY_NORM=one; both. Predictions in bench/NOTES.md (session 27).
#  3. bench_model --gemms by the split rule, the wave rule and splits forced to 1, 2, 4, 8, 16
#     (session 26's call4 sweep): each call among 10 queued.
#  4. The server, bf16 and fp8_e4m3 caches (session 26's call4), if time is left.
# Also the GPU sampler: test_sampler_cuda (both top_k/top_p paths at 128256 against the host's
# rules) and bench_model --sampler (candidates against the old whole-vocabulary bisections).
# Built here: build_gpu.sh; ninja -C build-gpu test_skinny_gemm_cuda test_model_cuda bench_model
# flashserve_server flashserve_bench; gpu_pack.sh less bench/, tests/, hf_dump, kv_cache_ppl.
# Carry build-gpu/tests/{test_skinny_gemm_cuda,test_model_cuda,test_sampler_cuda}, build-gpu/bench/bench_model,
# build-gpu/pack.
P=build-gpu/pack
LIBS="$PWD/$P/lib"; source bench/results/call_prologue.sh
timeout 90 $B/tests/test_skinny_gemm_cuda > "$out/test_skinny.log" 2>&1
echo "$(el) skinny rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_skinny.log" | tr '\n' ' ')"
timeout 60 $B/tests/test_model_cuda > "$out/test_model.log" 2>&1
echo "$(el) model rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_model.log" | tr '\n' ' ')"
timeout 90 $B/tests/test_sampler_cuda > "$out/test_sampler.log" 2>&1
echo "$(el) sampler rc $? $(grep -E '^\[  (PASSED|FAILED) ' "$out/test_sampler.log" | tr '\n' ' ')"
grep -E "Failure|FAILED|Expected|Which is" "$out/test_skinny.log" "$out/test_model.log" "$out/test_sampler.log" | head -10
timeout 60 $B/bench/bench_model --sampler > "$out/sampler.log" 2>&1; echo "$(el) sampler bench rc $?"; tail -7 "$out/sampler.log"
timeout 90 /usr/local/cuda/bin/compute-sanitizer --tool memcheck $B/tests/test_skinny_gemm_cuda \
  --gtest_filter='*RopeAppend*' > "$out/san_memcheck.log" 2>&1
echo "$(el) memcheck rc $? $(grep -E 'ERROR SUMMARY' "$out/san_memcheck.log" | tail -1)"
for cfg in "base" "wave FLASHSERVE_SKINNY_SPLIT_RULE=wave" "norm1 FLASHSERVE_SKINNY_NORM=one" \
           "both FLASHSERVE_SKINNY_SPLIT_RULE=wave FLASHSERVE_SKINNY_NORM=one"; do
  name=${cfg%% *}; vars=${cfg#"$name"}
  env $vars timeout 60 $B/bench/bench_model --quick --steps-only > "$out/steps_$name.log" 2>&1
  echo "$(el) == $name ($vars) rc $?"; grep -A5 "^batch" "$out/steps_$name.log" | head -6
done
for r in rule wave s1 s2 s4 s8 s16; do
  case $r in rule) e="";; wave) e="FLASHSERVE_SKINNY_SPLIT_RULE=wave";; *) e="FLASHSERVE_SKINNY_SPLITS=${r#s}";; esac
  env $e timeout 40 $B/bench/bench_model --gemms > "$out/gemms_$r.log" 2>&1; echo "$(el) gemms $r rc $?"
done
python3 - "$out" <<'PY'
import re, sys, os
out = sys.argv[1]
runs = ["rule", "wave", "s1", "s2", "s4", "s8", "s16"]
table = {}
for r in runs:
    path = os.path.join(out, f"gemms_{r}.log")
    if not os.path.exists(path): continue
    for line in open(path):
        m = re.match(r"(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", line)
        if m and m.group(1) in ("qkv", "o", "gate|up", "down", "lm_head"):
            table.setdefault((m.group(1), int(m.group(2))), {})[r] = (float(m.group(4)), float(m.group(5)))
print("skinny-l us (launched epilogue) by split rule / forced splits; cuBLAS us")
print(f"{'gemm':8} {'rows':>4} " + " ".join(f"{r:>7}" for r in runs) + f" {'cuBLAS':>7}")
for (g, m), v in table.items():
    if m not in (1, 8, 16) or "rule" not in v: continue
    print(f"{g:8} {m:4d} " + " ".join(f"{v[r][0]:7.1f}" if r in v else "      -" for r in runs) + f" {v['rule'][1]:7.1f}")
PY
left=$(( 570 - ($(date +%s) - t0) ))
if [ $left -gt 120 ]; then
  OUT=/tmp/serve IN=2048 OUTLEN=128 N1=8 N64=128 timeout $left bash scripts/gpu_serve_check.sh $P/client/flashserve_bench \
    bf16=$P/server/flashserve_server fp8_e4m3=$P/server/flashserve_server,--kv-cache-dtype,fp8_e4m3 2>&1 | tee "$out/serve.log" | tail -12
  cp /tmp/serve/*.json "$out/" 2>/dev/null
fi
echo "$(el) done"
