"""Prefill benchmark on the GPU: flashserve's varlen prefill (through the C ABI) next to
PyTorch SDPA's flash (FlashAttention-2) and cuDNN backends, same shapes, same process.
TFLOP/s = 4·Σ q_len·k_len·heads·head_dim / time, halved for causal. Timing: CUDA events around
each call after warm-up, median of repeats. Shapes as FlashAttention's benchmark: 16k tokens as
16×1k, 4×4k, 1×16k at hidden size 2048 (heads = 2048 / head_dim, MHA); a varlen batch of mixed
lengths; our paged K/V next to our packed K/V. "ours" is the default kernel (wgmma on sm_90);
"mma" the mma.sync kernel (Ampere's path) forced by FLASHSERVE_PREFILL_KERNEL=mma.

Usage: python3 bench/bench_prefill.py --lib build-gpu/libflashserve_c.so [--quick] [--json F]"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import flashserve_ctypes as fsc  # noqa: E402


def time_fn(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    times.sort()
    return times[len(times) // 2]


def ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, causal, dtype, paged=None):
    """q, o: [total, heads, dim]; k, v: [total, heads, dim] packed, or paged=(kp, vp, table, seq_lens, bs)."""
    a = fsc.PrefillArgs()
    a.device, a.dtype, a.batch = fsc.FS_DEVICE_CUDA, dtype, len(lens)
    a.num_heads = a.num_kv_heads = heads
    a.head_dim = dim
    a.q, a.q_row_stride, a.q_head_stride = q.data_ptr(), heads * dim, dim
    a.cu_seqlens_q, a.total_q, a.max_seqlen_q = cu.data_ptr(), q.shape[0], max(lens)
    if paged is None:
        a.paged = 0
        a.k, a.v = k.data_ptr(), v.data_ptr()
        a.k_row_stride = a.v_row_stride = heads * dim
        a.k_head_stride = a.v_head_stride = dim
        a.cu_seqlens_k, a.total_k = cu.data_ptr(), k.shape[0]
    else:
        kp, vp, table, seq_lens, bs = paged
        a.paged = 1
        pg = a.pages
        pg.k_pages, pg.v_pages = kp.data_ptr(), vp.data_ptr()
        pg.block_stride, pg.head_stride, pg.token_stride = kp.stride(0), kp.stride(1), dim
        pg.num_blocks, pg.block_size = kp.shape[0], bs
        pg.block_table, pg.block_table_stride = table.data_ptr(), table.shape[1]
        pg.seq_lens = seq_lens.data_ptr()
    a.mask.softmax_scale, a.mask.causal = 1.0 / math.sqrt(dim), int(causal)
    a.mask.window_left = a.mask.window_right = -1
    a.o, a.o_row_stride, a.o_head_stride = o.data_ptr(), heads * dim, dim
    a.lse = lse.data_ptr()

    def run(a=a):
        fsc.check(lib, lib.fs_prefill_run(fsc.ctypes.byref(a), torch.cuda.current_stream().cuda_stream), "prefill")
    return run, a


def to_pages(k, v, lens, heads, dim, bs, gen, pool="interleaved"):
    """Packed k, v -> [blocks, heads, bs, dim] views of the project's one pool [blocks, 2, heads, bs,
    dim] (KVStorage's layout), or (pool="separate") K and V pools apart; scattered block ids."""
    pages = [math.ceil(l / bs) for l in lens]
    nb = sum(pages) + 1
    if pool == "interleaved":
        kv = torch.zeros(nb, 2, heads, bs, dim, dtype=k.dtype, device="cuda")
        kp, vp = kv[:, 0], kv[:, 1]
    else:
        kp = torch.zeros(nb, heads, bs, dim, dtype=k.dtype, device="cuda")
        vp = torch.zeros_like(kp)
    perm = (torch.randperm(nb - 1, generator=gen, device="cuda") + 1).to(torch.int32)
    table = torch.zeros(len(lens), max(pages), dtype=torch.int32, device="cuda")
    at, start = 0, 0
    for b, (l, n) in enumerate(zip(lens, pages)):
        ids = perm[at:at + n]
        table[b, :n] = ids
        at += n
        kk = torch.zeros(n * bs, heads, dim, dtype=k.dtype, device="cuda")
        vv = torch.zeros_like(kk)
        kk[:l], vv[:l] = k[start:start + l], v[start:start + l]
        kp[ids.long()] = kk.view(n, bs, heads, dim).transpose(1, 2)
        vp[ids.long()] = vv.view(n, bs, heads, dim).transpose(1, 2)
        start += l
    return kp, vp, table, torch.tensor(lens, dtype=torch.int32, device="cuda")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--no-flex", action="store_true", help="accepted for a common command line; no flex here")
    ap.add_argument("--pool", choices=["interleaved", "separate"], default="interleaved",
                    help="the paged column's layout: the project's one pool, or K and V pools apart (a diagnostic)")
    ap.add_argument("--paged-only", action="store_true", help="only the shape with the paged column (4x4k, d 128)")
    args = ap.parse_args()
    lib = fsc.load(args.lib)
    gen = torch.Generator(device="cuda").manual_seed(5)
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}; paged column: {args.pool} pool",
          flush=True)
    rows = []
    dtypes = [(torch.bfloat16, fsc.FS_BFLOAT16), (torch.float16, fsc.FS_FLOAT16)]
    shapes = [[1024] * 16, [4096] * 4, [16384]]
    if args.quick:
        dtypes, shapes = dtypes[:1], shapes[:2]
    for tdt, fdt in dtypes:
        for dim in (64, 128):
            heads = 2048 // dim
            for lens in shapes + [None]:
                label = f"{len(lens)}x{lens[0] // 1024}k" if lens else "varlen mixed"
                if args.paged_only and not (label.startswith("4x") and dim == 128):
                    continue
                if lens is None:
                    g = torch.Generator().manual_seed(3)
                    lens = [int(x) for x in torch.randint(64, 4096, (8,), generator=g)] + [7, 1, 257, 1025]
                uniform = len(set(lens)) == 1
                total = sum(lens)
                q = torch.randn(total, heads, dim, dtype=tdt, device="cuda", generator=gen)
                k = torch.randn_like(q)
                v = torch.randn_like(q)
                o = torch.empty_like(q)
                lse = torch.empty(total, heads, dtype=torch.float32, device="cuda")
                cu = torch.tensor([0] + list(torch.tensor(lens).cumsum(0)), dtype=torch.int32, device="cuda")
                for causal in (False, True):
                    pairs = sum(l * l for l in lens)
                    flops = 4 * pairs * heads * dim / (2 if causal else 1)
                    r = {"dtype": str(tdt).split(".")[-1], "head_dim": dim, "shape": label, "causal": causal}
                    run, _ = ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, causal, fdt)
                    r["ours"] = flops / time_fn(run) / 1e12
                    os.environ["FLASHSERVE_PREFILL_KERNEL"] = "mma"
                    r["mma"] = flops / time_fn(run) / 1e12
                    del os.environ["FLASHSERVE_PREFILL_KERNEL"]
                    if label.startswith("4x") and dim == 128:  # paged next to packed
                        kp, vp, table, sl = to_pages(k, v, lens, heads, dim, 16, gen, args.pool)
                        run_p, _ = ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, causal, fdt,
                                           paged=(kp, vp, table, sl, 16))
                        r["ours_paged16"] = flops / time_fn(run_p) / 1e12
                    if uniform:
                        B, L = len(lens), lens[0]
                        qs, ks, vs = (t.view(B, L, heads, dim).transpose(1, 2) for t in (q, k, v))
                        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                            try:
                                def peer(be=be):
                                    with sdpa_kernel(be):
                                        return F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
                                r[name] = flops / time_fn(peer) / 1e12
                                if name == "flash":
                                    run()
                                    ref = peer().transpose(1, 2).reshape(total, heads, dim).float()
                                    r["maxerr"] = (o.float() - ref).abs().max().item()
                            except Exception as e:  # a peer that does not run: say so
                                r[name] = None
                                r[name + "_error"] = str(e).splitlines()[0][:100]
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                del q, k, v, o
                torch.cuda.empty_cache()
    print()
    print(f"{'dtype':<6}{'d':>4} {'shape':<13}{'causal':>7}{'ours TF/s':>10}{'paged16':>9}{'mma':>6}{'flash':>8}"
          f"{'cudnn':>8}{'x flash':>8}{'x cudnn':>8}{'maxerr':>9}")
    f = lambda v, w, p=0: f"{v:>{w}.{p}f}" if v is not None else f"{'n/a':>{w}}"  # noqa: E731
    for r in rows:
        ratio = r["ours"] / r["flash"] if r.get("flash") else None
        ratio_c = r["ours"] / r["cudnn"] if r.get("cudnn") else None
        print(f"{r['dtype']:<6}{r['head_dim']:>4} {r['shape']:<13}{str(r['causal']):>7}{f(r['ours'], 10)}"
              f"{f(r.get('ours_paged16'), 9)}{f(r.get('mma'), 6)}{f(r.get('flash'), 8)}{f(r.get('cudnn'), 8)}"
              f"{f(ratio, 8, 2)}{f(ratio_c, 8, 2)}{f(r.get('maxerr'), 9, 4)}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
