"""A short same-run check of ours against cuDNN (SDPA) and FA3 on chosen packed d 128 rows:
every column timed in turn for --rounds rounds (L2 flushed before each call, as bench_prefill.py),
the SM clock read by nvidia-smi after each column, per-round TFLOP/s and the medians printed.
For a second look at a bench_prefill row whose peers moved between calls.
Usage: python3 bench/peer_check.py --lib build-gpu/libflashserve_c.so [--rows 16x1k,4x4k] [--rounds 5]"""
import argparse
import statistics
import subprocess
import sys

import torch
from torch.nn.attention import SDPBackend

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_prefill as bp  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402


def sm_clock():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5).stdout.strip()
        return int(out.splitlines()[0])
    except Exception:  # noqa: BLE001
        return -1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--rows", default="16x1k,4x4k")
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    lib = fsc.load(args.lib)
    fa3, why = bp.fa3_fn()
    dim, heads = 128, 16
    gen = torch.Generator(device="cuda").manual_seed(7)
    for label in args.rows.split(","):
        n, l = label.split("x")
        B, L = int(n), int(l.rstrip("k")) * 1024
        q = torch.randn(B * L, heads, dim, dtype=torch.bfloat16, device="cuda", generator=gen)
        k, v = torch.randn_like(q), torch.randn_like(q)
        o = torch.empty_like(q)
        lse = torch.empty(B * L, heads, dtype=torch.float32, device="cuda")
        cu = torch.arange(0, B + 1, dtype=torch.int32, device="cuda") * L
        qs, ks, vs = (t.view(B, L, heads, dim).transpose(1, 2) for t in (q, k, v))
        for causal in (False, True):
            flops = 4 * B * L * L * heads * dim / (2 if causal else 1)
            cols = {"ours": bp.ours_fn(lib, q, k, v, o, lse, cu, [L] * B, heads, dim, causal, fsc.FS_BFLOAT16)[0]}

            cols["cudnn"] = lambda causal=causal: bp._sdpa(SDPBackend.CUDNN_ATTENTION, qs, ks, vs, causal)
            if fa3 is not None:
                cols["fa3"] = fa3(q, k, v, cu, cu, L, L, causal)
            res = {c: [] for c in cols}
            for rnd in range(args.rounds):
                line = []
                for c, fn in cols.items():
                    t = bp.time_fn(fn)
                    res[c].append(flops / t / 1e12)
                    line.append(f"{c} {res[c][-1]:.0f} @{sm_clock()}MHz")
                print(f"d128 {label} causal={causal} round {rnd}: " + ", ".join(line), flush=True)
            med = {c: statistics.median(v) for c, v in res.items()}
            best = max(v for c, v in med.items() if c != "ours")
            print(f"d128 {label} causal={causal} medians: " + ", ".join(f"{c} {v:.0f}" for c, v in med.items()) +
                  f"; ours / best {med['ours'] / best:.2f}" + ("" if fa3 else f" (no FA3: {why})"), flush=True)


if __name__ == "__main__":
    main()
