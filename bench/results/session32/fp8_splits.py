"""Session 32 (issue 25): FP8 decode at (1,32k), the row short of its 1.6x target (1.54 in
16-token pages): our time at the planner's split count and at even split counts, bf16 beside,
and the kernel breakdown (split kernel, merge) of the planner's FP8 call. Uses bench_decode's
helpers. Usage: python3 fp8_splits.py --lib build-gpu/libflashserve_c.so"""
import argparse
import sys

import torch

sys.path.insert(0, "bench")
import bench_decode as bd  # noqa: E402
import flashserve_ctypes as fsc  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--lib", required=True)
args = ap.parse_args()
torch.manual_seed(0)
gen = torch.Generator(device="cuda").manual_seed(1234)
lib = fsc.load(args.lib)
sms = fsc.ctypes.c_int32()
fsc.check(lib, lib.fs_cuda_sm_count(0, fsc.ctypes.byref(sms)), "sm count")
workers = 2 * sms.value
print(f"device {torch.cuda.get_device_name()}, {sms.value} SMs", flush=True)
for page in (16, 64):
    lens = [32768]
    case = bd.Case(lens, page, torch.bfloat16, bd.rotation_copies(lens), gen, 1, "scattered", "interleaved")
    fns, keep, plan = bd.ours(lib, case, workers)
    t16 = bd.graph_time(fns)
    print(f"(1,32k) page {page}: bf16 splits {plan.num_splits} {t16 * 1e6:.1f} us "
          f"{bd.kernel_breakdown(fns[:1])}", flush=True)
    for fmt in ("e4m3",):
        p8 = bd.fp8_pages(case, fmt)
        f8, k8, plan8 = bd.ours(lib, case, workers, fp8=p8)
        t8 = bd.graph_time(f8)
        print(f"  {fmt} planner: splits {plan8.num_splits} ppsplit {plan8.pages_per_split} {t8 * 1e6:.1f} us "
              f"x bf16 {t16 / t8:.3f} {bd.kernel_breakdown(f8[:1])}", flush=True)
        del f8, k8
        for n in (8, 12, 16, 24, 32, 40, 48, 64):
            f8, k8, plan8 = bd.ours(lib, case, workers, splits=n, fp8=p8)
            t8 = bd.graph_time(f8)
            print(f"  {fmt} {n:3d} even splits: {t8 * 1e6:.1f} us x bf16 {t16 / t8:.3f}", flush=True)
            del f8, k8
    del case, fns, keep
    torch.cuda.empty_cache()
