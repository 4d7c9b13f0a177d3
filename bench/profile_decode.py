"""A few eager calls of our decode on one shape, for a profiler (ncu) to look at.
Usage: python3 bench/profile_decode.py --lib build-gpu/libflashserve_c.so [--batch 1 --ctx 32768]"""
import argparse
import sys

import torch

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import bench_decode as bd  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lib")
ap.add_argument("--batch", type=int, default=1)
ap.add_argument("--ctx", type=int, default=32768)
ap.add_argument("--calls", type=int, default=3)
args = ap.parse_args()
lib = fsc.load(args.lib)
gen = torch.Generator(device="cuda").manual_seed(1)
case = bd.Case([args.ctx] * args.batch, 16, torch.bfloat16, 1, gen)
fns, keep, plan = bd.ours(lib, case, 0)  # 0: the kernel's launch shape on this device
for _ in range(args.calls):
    fns[0]()
torch.cuda.synchronize()
print(f"profiled: batch {args.batch} ctx {args.ctx}, {plan.num_splits} splits")
