#!/usr/bin/env bash
# Session 26 call 4 (issue 27): the decode projections alone, skinny against cuBLAS, each call
# timed among 10 queued back to back (session 25's table timed single launches, the host's launch
# latency inside), by the split rule and with the splits forced to 1, 2, 4, 8, 16
# (FLASHSERVE_SKINNY_SPLITS): which split count streams each shape fastest. Then the server with
# a bf16 and an fp8_e4m3 cache (issue 25; the FP8 chunks on the warp-specialized kernel's new
# producer). Built here: build_gpu.sh, bench_model, the server and client; gpu_pack.sh less
# bench/, tests/, hf_dump, kv_cache_ppl. Carry build-gpu/pack and build-gpu/bench/bench_model.
set -uo pipefail
P=build-gpu/pack
export LD_LIBRARY_PATH="$PWD/$P/lib:/usr/local/cuda/lib64"
out=${OUT:-/tmp/o}; mkdir -p "$out"
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,power.draw --format=csv,noheader
timeout 60 build-gpu/bench/bench_model --gemms > "$out/gemms_rule.log" 2>&1; echo "rule rc $?"
for s in 1 2 4 8 16; do
  FLASHSERVE_SKINNY_SPLITS=$s timeout 60 build-gpu/bench/bench_model --gemms > "$out/gemms_s$s.log" 2>&1; echo "splits $s rc $?"
done
python3 - "$out" <<'PY'
import re, sys, glob, os
out = sys.argv[1]
runs = ["rule"] + [f"s{s}" for s in (1, 2, 4, 8, 16)]
table = {}
for r in runs:
    for line in open(os.path.join(out, f"gemms_{r}.log")):
        m = re.match(r"(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s", line)
        if m and m.group(1) in ("qkv", "o", "gate|up", "down", "lm_head"):
            table.setdefault((m.group(1), int(m.group(2))), {})[r] = (float(m.group(4)), float(m.group(5)))
print("skinny-l us (launched epilogue) by splits; cuBLAS us")
print(f"{'gemm':8} {'rows':>4} " + " ".join(f"{r:>7}" for r in runs) + f" {'cuBLAS':>7}")
for (g, m), v in table.items():
    if m not in (1, 8, 16): continue
    print(f"{g:8} {m:4d} " + " ".join(f"{v[r][0]:7.1f}" if r in v else "      -" for r in runs) + f" {v['rule'][1]:7.1f}")
PY
OUT=/tmp/serve IN=2048 OUTLEN=128 N1=8 N64=128 timeout 170 bash scripts/gpu_serve_check.sh $P/client/flashserve_bench \
  bf16=$P/server/flashserve_server fp8_e4m3=$P/server/flashserve_server,--kv-cache-dtype,fp8_e4m3 2>&1 | tee "$out/serve.log" | tail -12
cp /tmp/serve/*.json "$out/" 2>/dev/null
