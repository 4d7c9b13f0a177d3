"""A few calls of our prefill on one shape, for a profiler (ncu) to look at.
Usage: python3 bench/profile_prefill.py --lib build-gpu/libflashserve_c.so [--batch 4 --len 4096 --dim 128]
[--causal] [--prefix N: N cached keys before each sequence's queries] [--paged BS: K/V in pages of BS]
(FLASHSERVE_PREFILL_KERNEL=mma|wgmma|ws picks the kernel as for any call.)"""
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
ap.add_argument("--prefix", type=int, default=0)
ap.add_argument("--paged", type=int, default=0)
args = ap.parse_args()
lib = fsc.load(args.lib)
gen = torch.Generator(device="cuda").manual_seed(1)
heads, lens = 2048 // args.dim, [args.len] * args.batch
total, klens = sum(lens), [n + args.prefix for n in lens]
q = torch.randn(total, heads, args.dim, dtype=torch.bfloat16, device="cuda", generator=gen)
k = torch.randn(sum(klens), heads, args.dim, dtype=torch.bfloat16, device="cuda", generator=gen)
v, o = torch.randn_like(k), torch.empty_like(q)
lse = torch.empty(total, heads, dtype=torch.float32, device="cuda")
cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
cu_k = torch.tensor([0] + list(torch.tensor(klens).cumsum(0)), dtype=torch.int32, device="cuda")
paged = None
if args.paged:
    kp, vp, table, sl = bp.to_pages(k, v, klens, heads, args.dim, args.paged, gen)
    paged = (kp, vp, table, sl, args.paged)
run, _ = bp.ours_fn(lib, q, k, v, o, lse, cu, klens, heads, args.dim, args.causal, fsc.FS_BFLOAT16, paged=paged,
                    cu_k=cu_k)
for _ in range(args.calls):
    run()
torch.cuda.synchronize()
print(f"profiled: {args.batch}x{args.len} (+{args.prefix} cached) d{args.dim} causal={args.causal} paged={args.paged}")
