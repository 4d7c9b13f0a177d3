"""Same-run A/B of our prefill's settings (environment overrides read at every call): each row
is timed under each configuration in turn, twice (the second pass shows the spread), L2
flushed before every call as in bench_prefill.py. No peers: the ratios between configurations
are the point; bench_prefill.py gives them against the peers.
Usage: python3 bench/ab_prefill.py --lib build-gpu/libflashserve_c.so --config NAME=VAR=VAL[,VAR=VAL] ..."""
import argparse
import math
import os
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_prefill as bp  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402

ROWS = [  # (head_dim, lens, causal, paged block size or 0)
    (128, [1024] * 16, False, 0), (128, [1024] * 16, True, 0), (128, [4096] * 4, False, 0),
    (128, [4096] * 4, True, 0), (128, [16384], False, 0), (128, [16384], True, 0),
    (128, [4096] * 4, True, 16), (64, [1024] * 16, False, 0), (64, [16384], True, 0),
    (256, [16384], False, 0), (256, [16384], True, 0),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--config", action="append", default=[], help="NAME=VAR=VAL[,VAR=VAL]; 'default' = no override")
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--only", help="comma-separated indices into ROWS")
    args = ap.parse_args()
    lib = fsc.load(args.lib)
    configs = [("default", {})]
    for c in args.config:
        name, _, rest = c.partition("=")
        configs.append((name, dict(kv.split("=", 1) for kv in rest.split(","))))
    gen = torch.Generator(device="cuda").manual_seed(5)
    print(f"{'d':>4} {'shape':<8}{'causal':>7}{'paged':>6}" + "".join(f"{n:>12}" for n, _ in configs), flush=True)
    rows = [ROWS[int(i)] for i in args.only.split(",")] if args.only else ROWS
    for dim, lens, causal, bs in rows:
        heads, total = 2048 // dim, sum(lens)
        q = torch.randn(total, heads, dim, dtype=torch.bfloat16, device="cuda", generator=gen)
        k, v, o = torch.randn_like(q), torch.randn_like(q), torch.empty_like(q)
        lse = torch.empty(total, heads, dtype=torch.float32, device="cuda")
        cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
        paged = None
        if bs:
            kp, vp, table, sl = bp.to_pages(k, v, lens, heads, dim, bs, gen)
            paged = (kp, vp, table, sl, bs)
        run, _ = bp.ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, causal, fsc.FS_BFLOAT16, paged=paged)
        flops = 4 * sum(l * l for l in lens) * heads * dim / (2 if causal else 1)
        for pas in range(args.passes):
            vals = []
            for _, env in configs:
                os.environ.update(env)
                try:
                    vals.append(f"{flops / bp.time_fn(run) / 1e12:>12.0f}")
                except Exception as e:  # noqa: BLE001
                    vals.append(f"{'err':>12}")
                    print("  ", str(e).splitlines()[0][:120])
                for key in env:
                    del os.environ[key]
            label = f"{len(lens)}x{lens[0] // 1024}k"
            print(f"{dim:>4} {label:<8}{str(causal):>7}{bs:>6}" + "".join(vals) + ("" if pas == 0 else "  (again)"),
                  flush=True)
        del q, k, v, o, paged
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
