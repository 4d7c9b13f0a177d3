"""A few calls of our prefill on one shape, for a profiler (ncu) to look at.
Usage: python3 bench/profile_prefill.py --lib build-gpu/libflashserve_c.so [--batch 4 --len 4096 --dim 128]
(FLASHSERVE_PREFILL_KERNEL=mma|wgmma picks the kernel as for any call.)"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_prefill as bp  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lib")
ap.add_argument("--batch", type=int, default=4)
ap.add_argument("--len", type=int, default=4096)
ap.add_argument("--dim", type=int, default=128)
ap.add_argument("--causal", action="store_true")
ap.add_argument("--calls", type=int, default=3)
args = ap.parse_args()
lib = fsc.load(args.lib)
gen = torch.Generator(device="cuda").manual_seed(1)
heads, lens = 2048 // args.dim, [args.len] * args.batch
total = sum(lens)
q = torch.randn(total, heads, args.dim, dtype=torch.bfloat16, device="cuda", generator=gen)
k, v, o = torch.randn_like(q), torch.randn_like(q), torch.empty_like(q)
lse = torch.empty(total, heads, dtype=torch.float32, device="cuda")
cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
run, _ = bp.ours_fn(lib, q, k, v, o, lse, cu, lens, heads, args.dim, args.causal, fsc.FS_BFLOAT16)
for _ in range(args.calls):
    run()
torch.cuda.synchronize()
print(f"profiled: {args.batch}x{args.len} d{args.dim} causal={args.causal}")
