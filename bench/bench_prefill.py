"""Prefill benchmark on the GPU: flashserve's varlen prefill (through the C ABI) next to the
peers on the same tensors, in the same process: PyTorch SDPA's flash (FlashAttention-2) and cuDNN
backends, FlashAttention-3 (the hopper/ build from the PyPI wheel tokenspeed-fa3, forward) and,
with --flashinfer, FlashInfer's ragged prefill (fa3 backend; JIT-compiled on first use, 70-90 s a
head dim). TFLOP/s = 4·Σ q_len·k_len·heads·head_dim / time, halved for causal (for a chunk over
a cached prefix: the visible pairs). Timing: L2 flushed (a 256 MB write) before every call, CUDA
events around the call alone, median of the repeats, after 30 ms of warm-up calls; every column of
a row timed in --rounds rounds (3), the median of the rounds reported and the row's largest spread
((max - min) / median of any column) printed last.

Rows: 16k tokens as 16×1k, 4×4k, 1×16k at hidden 2048 (heads = 2048 / head_dim, MHA), head dims
64 and 128 (and 256 where the build has it), a varlen batch of mixed lengths, a skewed one (one
8k prompt among 63 short ones) and 200 short prompts of 64-511 tokens ("varlen many": more
sequences than the kernel's sequence cache), causal and not; chunked prefill (2k new tokens over a
30k cached prefix, our K/V in 16-token pages, the peers' packed and in 16-token pages of their own
layout, same block ids); GQA 32/8 at 128k causal. "ours" is the default kernel (the
warp-specialized TMA kernel on sm_90), "v3" the wgmma kernel before it
(FLASHSERVE_PREFILL_KERNEL=wgmma), "mma" the mma.sync kernel (Ampere's path), "ws_alt" and
"ws_order0" the warp-specialized kernel with the other key tile (d 128) and with session 11's work
order (A/B columns, see measure()). The short table last gives ours ÷ the best peer of each row.

Usage: python3 bench/bench_prefill.py --lib build-gpu/libflashserve_c.so [--quick] [--flashinfer] [--json F]"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, __file__.rsplit("/", 1)[0])
import flashserve_ctypes as fsc  # noqa: E402
from bench_decode import fp8_pool  # noqa: E402
from prefill_table import print_table  # noqa: E402

_FLUSH = None


def flush_l2():
    global _FLUSH
    if _FLUSH is None:
        _FLUSH = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    _FLUSH.fill_(1)


def time_fn(fn, reps=15, warm_s=0.03):
    # Warm up for 30 ms of calls (at least 3): an idle GPU's clocks take a few milliseconds to
    # come back, and with 3 calls only the first row timed after a long host setup ran slow
    # (session 17 call 3, 2k over 30k in 16-token pages: ours 485 timed first, 550 for the same
    # kernel timed later in the row).
    torch.cuda.synchronize()
    start, calls = time.perf_counter(), 0
    while calls < 3 or time.perf_counter() - start < warm_s:
        fn()
        calls += 1
        if calls % 4 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush_l2()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    times.sort()
    return times[len(times) // 2]


def ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, causal, dtype, paged=None, kv_heads=None, cu_k=None, fp8=None):
    """q, o: [total, heads, dim]; k, v: [total, heads, dim] packed, or paged=(kp, vp, table, seq_lens, bs);
    fp8: with paged, the pages' (C ABI dtype, K scales, V scales) (kp, vp then FP8 codes)."""
    a = fsc.PrefillArgs()
    a.device, a.dtype, a.batch = fsc.FS_DEVICE_CUDA, dtype, len(lens)
    kv_heads = kv_heads or heads
    a.num_heads, a.num_kv_heads = heads, kv_heads
    a.head_dim = dim
    a.q, a.q_row_stride, a.q_head_stride = q.data_ptr(), heads * dim, dim
    q_lens = (cu[1:] - cu[:-1]).tolist()
    a.cu_seqlens_q, a.total_q, a.max_seqlen_q = cu.data_ptr(), q.shape[0], max(q_lens)
    if paged is None:
        a.paged = 0
        a.k, a.v = k.data_ptr(), v.data_ptr()
        a.k_row_stride = a.v_row_stride = kv_heads * dim
        a.k_head_stride = a.v_head_stride = dim
        a.cu_seqlens_k, a.total_k = (cu_k if cu_k is not None else cu).data_ptr(), k.shape[0]
    else:
        kp, vp, table, seq_lens, bs = paged
        a.paged = 1
        pg = a.pages
        pg.k_pages, pg.v_pages = kp.data_ptr(), vp.data_ptr()
        pg.block_stride, pg.head_stride, pg.token_stride = kp.stride(0), kp.stride(1), dim
        pg.num_blocks, pg.block_size = kp.shape[0], bs
        pg.block_table, pg.block_table_stride = table.data_ptr(), table.shape[1]
        pg.seq_lens = seq_lens.data_ptr()
        if fp8 is not None:
            pg.dtype, pg.k_scales, pg.v_scales = fp8[0], fp8[1].data_ptr(), fp8[2].data_ptr()
        a.total_k = int(seq_lens.sum())  # the hint the server gives (its key tile)
    a.mask.softmax_scale, a.mask.causal = 1.0 / math.sqrt(dim), int(causal)
    a.mask.window_left = a.mask.window_right = -1
    a.o, a.o_row_stride, a.o_head_stride = o.data_ptr(), heads * dim, dim
    a.lse = lse.data_ptr()

    def run(a=a):
        fsc.check(lib, lib.fs_prefill_run(fsc.ctypes.byref(a), torch.cuda.current_stream().cuda_stream), "prefill")
    run.args = a
    return run, a


def ws_key_tile(lib, a):
    """The key tile the library's warp-specialized kernel takes for args a (its own rule)."""
    tile = fsc.ctypes.c_int32(0)
    fsc.check(lib, lib.fs_prefill_ws_key_tile(fsc.ctypes.byref(a), fsc.ctypes.byref(tile)), "ws key tile")
    return tile.value


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
    if os.environ.get("FLASHSERVE_BENCH_PAGES_IN_ORDER") == "1":  # (diagnosis: ids 1, 2, ... in order)
        perm = torch.arange(1, nb, dtype=torch.int32, device="cuda")
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


def fa3_fn():
    """FlashAttention-3's varlen forward, or None (with the reason) where the wheel is absent."""
    try:
        from flash_attn_interface import flash_attn_varlen_func
    except Exception as e:  # noqa: BLE001
        return None, str(e).splitlines()[0][:100]

    def make(q, k, v, cu_q, cu_k, max_q, max_k, causal):
        def run():
            out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal)
            return out[0] if isinstance(out, tuple) else out
        return run
    return make, None


def fa3_paged_fn():
    """FlashAttention-3 over a paged cache (flash_attn_with_kvcache with a page table), or None."""
    try:
        from flash_attn_interface import flash_attn_with_kvcache
    except Exception as e:  # noqa: BLE001
        return None, str(e).splitlines()[0][:100]

    def make(q, kc, vc, table, seq_lens, causal):
        """q: [total_q, heads, dim] of one sequence; kc, vc: [blocks, page, kv_heads, dim] (FA3's layout)."""
        def run():
            return flash_attn_with_kvcache(q.unsqueeze(0), kc, vc, cache_seqlens=seq_lens, page_table=table,
                                           causal=causal)[0]
        return run
    return make, None


def flashinfer_paged_fn(ws):
    import flashinfer

    def make(q, kc, vc, table, seq_lens, causal):
        """One sequence over pages kc, vc: [blocks, page, kv_heads, dim] (NHD) named by table[0]."""
        bs = kc.shape[1]
        n = (int(seq_lens[0]) + bs - 1) // bs
        w = flashinfer.BatchPrefillWithPagedKVCacheWrapper(ws, kv_layout="NHD", backend="fa3")
        dev = q.device
        w.plan(torch.tensor([0, q.shape[0]], dtype=torch.int32, device=dev),
               torch.tensor([0, n], dtype=torch.int32, device=dev), table[0, :n].contiguous(),
               torch.tensor([int(seq_lens[0]) - (n - 1) * bs], dtype=torch.int32, device=dev),
               q.shape[1], kc.shape[2], q.shape[2], bs, causal=causal, q_data_type=q.dtype)
        return lambda: w.run(q, (kc, vc))
    return make


def flashinfer_fn():
    try:
        import flashinfer_shim  # noqa: F401  (the GPU machine's stand-ins for deps flashinfer lacks there)
        import flashinfer
    except Exception as e:  # noqa: BLE001
        return None, str(e).splitlines()[0][:100]
    ws = torch.empty(512 << 20, dtype=torch.uint8, device="cuda")

    def make(q, k, v, cu_q, cu_k, max_q, max_k, causal):
        w = flashinfer.BatchPrefillWithRaggedKVCacheWrapper(ws, kv_layout="NHD", backend="fa3")
        w.plan(cu_q, cu_k, q.shape[1], k.shape[1], q.shape[2], causal=causal, q_data_type=q.dtype)
        return lambda: w.run(q, k, v)
    make.paged = flashinfer_paged_fn(ws)
    return make, None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--quick", action="store_true", help="bf16 only, no mma column, fewer shapes")
    ap.add_argument("--json")
    ap.add_argument("--flashinfer", action="store_true", help="FlashInfer beside the others (JIT on first use)")
    ap.add_argument("--no-flex", action="store_true", help="accepted for a common command line; no flex here")
    ap.add_argument("--pool", choices=["interleaved", "separate"], default="interleaved",
                    help="the paged column's layout: the project's one pool, or K and V pools apart (a diagnostic)")
    ap.add_argument("--paged-only", action="store_true", help="only the shape with the paged column (4x4k, d 128)")
    ap.add_argument("--no-extra", action="store_true", help="leave out the chunked-prefill and 128k GQA rows")
    ap.add_argument("--chunked-only", action="store_true",
                    help="only the chunked-prefill row (2k over 30k: packed, paged 16/64, FP8 pages, the peers' paged)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of every column a row (medians reported)")
    ap.add_argument("--dims", default="64,128,256",
                    help="the head dims of the shape rows (comma-separated): a run split across calls "
                         "(prefill_table.py joins their logs)")
    args = ap.parse_args()
    lib = fsc.load(args.lib)
    gen = torch.Generator(device="cuda").manual_seed(5)
    fa3, fa3_err = fa3_fn()
    fi, fi_err = flashinfer_fn() if args.flashinfer else (None, "not asked for (--flashinfer)")
    print(f"device {torch.cuda.get_device_name()}, torch {torch.__version__}; paged column: {args.pool} pool; "
          f"FA3: {'yes' if fa3 else fa3_err}; FlashInfer: {'yes' if fi else fi_err}; L2 flushed before each call",
          flush=True)
    rows = []
    dtypes = [(torch.bfloat16, fsc.FS_BFLOAT16), (torch.float16, fsc.FS_FLOAT16)]
    shapes = [[1024] * 16, [4096] * 4, [16384]]
    dims = [int(d) for d in args.dims.split(",")]
    if args.quick:
        dtypes = dtypes[:1]

    def measure(r, flops, run, peers_in, extra=()):
        """Times ours (default, v3, mma, the ws variants, extra: (column, fn) pairs) and each peer in
        args.rounds rounds, every column once a round (the GPU's clocks drift over seconds: a column
        timed once is timed at one moment); each column's value is its median over the rounds,
        its spread (max - min) / median beside it; fills r."""
        entries = [("ours", run, {})]
        for col, env in (("v3", "wgmma"), ("mma", "mma")):
            if col == "mma" and args.quick:
                continue
            if col == "v3" and r["head_dim"] == 256:
                continue
            entries.append((col, run, {"FLASHSERVE_PREFILL_KERNEL": env}))
        # A/B columns of the warp-specialized kernel, same run: "ws_alt" (d 128) with the key tile
        # the default does not take (128 where it takes 176, else 176; the library says which it
        # takes: fs_prefill_ws_key_tile); "ws_order0" with the work order of session 11 (one
        # section: q tile slowest over all pairs).
        if r["head_dim"] == 128:
            r["ws_n"] = ws_key_tile(lib, run.args)
            alt = "128" if r["ws_n"] == 176 else "176"
            r["alt_n"] = int(alt)
            entries.append(("ws_alt", run, {"FLASHSERVE_PREFILL_KERNEL": "ws", "FLASHSERVE_PREFILL_WS_BLOCK_N": alt}))
        if r["head_dim"] == 64:  # (v3 was the default on the short rows before v4.28)
            entries.append(("ws", run, {"FLASHSERVE_PREFILL_KERNEL": "ws"}))
        if r["shape"] != "2k over 30k":
            entries.append(("ws_order0", run, {"FLASHSERVE_PREFILL_KERNEL": "ws", "FLASHSERVE_PREFILL_WS_SECTION": "0"}))
        entries += [(col, fn, {}) for col, fn in extra]
        for name, mk in peers_in:
            try:
                entries.append((name, mk(), {}))
                r[name + "_maxdiff"] = None
            except Exception as e:  # noqa: BLE001 - a peer that does not run: say so
                r[name] = None
                r[name + "_error"] = str(e).splitlines()[0][:100]
        vals = {col: [] for col, _, _ in entries}
        for _ in range(args.rounds):
            for col, fn, env in entries:
                if col + "_error" in r:
                    continue
                saved = {key: os.environ.get(key) for key in env}  # the caller's own settings come back
                os.environ.update(env)
                try:
                    vals[col].append(flops / time_fn(fn) / 1e12)
                except Exception as e:  # noqa: BLE001
                    r[col] = None
                    r[col + "_error"] = str(e).splitlines()[0][:100]
                finally:
                    for key, val in saved.items():
                        if val is None:
                            del os.environ[key]
                        else:
                            os.environ[key] = val
        for col, v in vals.items():
            if col + "_error" in r or not v:
                continue
            v.sort()
            r[col] = v[len(v) // 2]
            r[col + "_spread"] = (v[-1] - v[0]) / r[col]
        peer_vals = [r[n] for n, _ in peers_in if r.get(n)]
        r["best_peer"] = max(peer_vals) if peer_vals else None

    def varlen_peers(q, k, v, cu_q, cu_k, max_q, max_k, causal):
        """The packed-varlen peers (FA3, FlashInfer) that are here, as (name, maker) pairs for measure()."""
        return [(name, lambda mk=mk: mk(q, k, v, cu_q, cu_k, max_q, max_k, causal))
                for name, mk in (("fa3", fa3), ("flashinfer", fi)) if mk is not None]

    def check_against(r, o, ref, name):
        if ref is not None:
            r[name + "_maxdiff"] = (o.float() - ref.float()).abs().max().item()

    for tdt, fdt in dtypes:
        for dim in dims:
            heads = 2048 // dim
            for lens in shapes + ["varlen mixed", "varlen skew", "varlen many"]:
                label = f"{len(lens)}x{lens[0] // 1024}k" if not isinstance(lens, str) else lens
                paged_row = (label.startswith("4x") or label == "varlen skew") and dim == 128
                if (args.paged_only and not paged_row) or args.chunked_only:
                    continue
                if dim == 256 and label != "1x16k":
                    continue
                if args.quick and (label == "varlen mixed" or (label in ("varlen skew", "varlen many") and dim != 128)):
                    continue
                if label == "varlen mixed":
                    g = torch.Generator().manual_seed(3)
                    lens = [int(x) for x in torch.randint(64, 4096, (8,), generator=g)] + [7, 1, 257, 1025]
                elif label == "varlen skew":  # a long prompt among short ones, as a server's prefill step
                    g = torch.Generator().manual_seed(4)
                    lens = [8192] + [int(x) for x in torch.randint(64, 512, (63,), generator=g)]
                elif label == "varlen many":  # a server's step of short prompts: ab_prefill's "many" batch
                    g = torch.Generator().manual_seed(8)
                    lens = [int(x) for x in torch.randint(64, 512, (200,), generator=g)]
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
                    r = {"dtype": str(tdt).split(".")[-1], "head_dim": dim, "shape": label, "causal": causal,
                         "mean_k": total / len(lens), "max_q": max(lens), "total_q": total}
                    run, _ = ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, causal, fdt)
                    peers = []
                    if uniform:
                        B, L = len(lens), lens[0]
                        qs, ks, vs = (t.view(B, L, heads, dim).transpose(1, 2) for t in (q, k, v))
                        for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                            def peer(be=be, qs=qs, ks=ks, vs=vs, causal=causal):
                                return _sdpa(be, qs, ks, vs, causal)
                            peers.append((name, lambda peer=peer: peer))
                    peers += varlen_peers(q, k, v, cu, cu, max(lens), max(lens), causal)
                    extra, pages = [], None
                    if paged_row:
                        pages = to_pages(k, v, lens, heads, dim, 16, gen, args.pool)
                        kp, vp, table, sl = pages
                        run_p, _ = ours_fn(lib, q, k, v, o, lse, cu, lens, heads, dim, causal, fdt,
                                           paged=(kp, vp, table, sl, 16))
                        extra.append(("ours_paged16", run_p))
                    measure(r, flops, run, peers, extra)
                    del pages, extra
                    run()
                    if fa3 is not None:
                        check_against(r, o, fa3(q, k, v, cu, cu, max(lens), max(lens), causal)(), "fa3")
                    if uniform:
                        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                            ref = F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal)
                        check_against(r, o, ref.transpose(1, 2).reshape(total, heads, dim), "flash")
                    rows.append(r)
                    print(json.dumps(r), flush=True)
                del q, k, v, o
                torch.cuda.empty_cache()

    if not args.no_extra and not args.paged_only:
        tdt, fdt = torch.bfloat16, fsc.FS_BFLOAT16
        # Chunked prefill: 2k new tokens attend (causal, bottom-right) to a 30k prefix and themselves.
        heads, dim, new, prefix = 16, 128, 2048, 30720
        kl = new + prefix
        q = torch.randn(new, heads, dim, dtype=tdt, device="cuda", generator=gen)
        k = torch.randn(kl, heads, dim, dtype=tdt, device="cuda", generator=gen)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        lse = torch.empty(new, heads, dtype=torch.float32, device="cuda")
        cu_q = torch.tensor([0, new], dtype=torch.int32, device="cuda")
        cu_k = torch.tensor([0, kl], dtype=torch.int32, device="cuda")
        pairs = new * prefix + new * (new + 1) // 2
        flops = 4 * pairs * heads * dim
        r = {"dtype": "bfloat16", "head_dim": dim, "shape": "2k over 30k", "causal": True, "mean_k": kl}
        kp, vp, table, sl = to_pages(k, v, [kl], heads, dim, 16, gen, args.pool)
        run, _ = ours_fn(lib, q, k, v, o, lse, cu_q, [kl], heads, dim, True, fdt, paged=(kp, vp, table, sl, 16))
        peers = varlen_peers(q, k, v, cu_q, cu_k, new, kl, True)
        # The peers over the same pages too (same block ids, each in its own layout: FA3 and
        # FlashInfer take [blocks, page, heads, dim]), so paged is compared with paged as well as
        # with their packed; best_peer is the best of all of them.
        kc = kp.permute(0, 2, 1, 3).contiguous()
        vc = vp.permute(0, 2, 1, 3).contiguous()
        fa3p, _ = fa3_paged_fn()
        if fa3p is not None:
            peers.append(("fa3_paged16", lambda: fa3p(q, kc, vc, table, sl, True)))
        if fi is not None:
            peers.append(("flashinfer_paged16", lambda: fi.paged(q, kc, vc, table, sl, True)))
        run_packed, _ = ours_fn(lib, q, k, v, o, lse, cu_q, [new], heads, dim, True, fdt, cu_k=cu_k)
        kp64, vp64, table64, sl64 = to_pages(k, v, [kl], heads, dim, 64, gen, args.pool)  # pages TMA takes
        run64, _ = ours_fn(lib, q, k, v, o, lse, cu_q, [kl], heads, dim, True, fdt,
                           paged=(kp64, vp64, table64, sl64, 64))
        # The same pages in FP8 (issue 25: "paged prefill over an FP8 prefix within 10% of its bf16
        # TFLOP/s"): e4m3 codes, a scale a kv head (amax / 448).
        k8, v8, ks8, vs8, fs8, kv8 = fp8_pool(kp, vp, "e4m3")
        run_fp8, _ = ours_fn(lib, q, k, v, o, lse, cu_q, [kl], heads, dim, True, fdt, paged=(k8, v8, table, sl, 16),
                             fp8=(fs8, ks8, vs8))
        measure(r, flops, run, peers, [("ours_packed", run_packed), ("ours_paged64", run64),
                                       ("ours_paged16_e4m3", run_fp8)])
        if r.get("ours_paged16_e4m3"):  # it ran: its difference from FA3 over the 16-bit values (kernel + quantization)
            run_fp8()
            if fa3 is not None:
                check_against(r, o, fa3(q, k, v, cu_q, cu_k, new, kl, True)(), "ours_paged16_e4m3")
        del k8, v8, kv8
        for name, mk in peers:
            if name.endswith("_paged16") and r.get(name):
                check_against(r, mk()(), fa3(q, k, v, cu_q, cu_k, new, kl, True)() if fa3 else None, name)
        del kc, vc, kp64, vp64
        run()
        if fa3 is not None:
            check_against(r, o, fa3(q, k, v, cu_q, cu_k, new, kl, True)(), "fa3")
        rows.append(r)
        print(json.dumps(r), flush=True)
        del q, k, v, o, kp, vp
        torch.cuda.empty_cache()
    if not args.no_extra and not args.paged_only and not args.chunked_only:
        tdt, fdt = torch.bfloat16, fsc.FS_BFLOAT16
        # GQA 32/8 at 128k, causal.
        heads, kvh, dim, L = 32, 8, 128, 131072
        q = torch.randn(L, heads, dim, dtype=tdt, device="cuda", generator=gen)
        k = torch.randn(L, kvh, dim, dtype=tdt, device="cuda", generator=gen)
        v = torch.randn_like(k)
        o = torch.empty_like(q)
        lse = torch.empty(L, heads, dtype=torch.float32, device="cuda")
        cu = torch.tensor([0, L], dtype=torch.int32, device="cuda")
        flops = 4 * L * L * heads * dim / 2
        r = {"dtype": "bfloat16", "head_dim": dim, "shape": "GQA 32/8 128k", "causal": True, "mean_k": L}
        run, _ = ours_fn(lib, q, k, v, o, lse, cu, [L], heads, dim, True, fdt, kv_heads=kvh)
        peers = varlen_peers(q, k, v, cu, cu, L, L, True)
        qs, ks, vs = q.unsqueeze(0).transpose(1, 2), k.unsqueeze(0).transpose(1, 2), v.unsqueeze(0).transpose(1, 2)
        peers.append(("cudnn", lambda: (lambda: _sdpa(SDPBackend.CUDNN_ATTENTION, qs, ks, vs, gqa=True))))
        measure(r, flops, run, peers)
        run()
        if fa3 is not None:
            check_against(r, o, fa3(q, k, v, cu, cu, L, L, True)(), "fa3")
        rows.append(r)
        print(json.dumps(r), flush=True)
        del q, k, v, o
        torch.cuda.empty_cache()

    if args.json:  # before the table: a failure there loses nothing
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)
    print()
    print_table(rows)


def _sdpa(be, qs, ks, vs, causal=True, gqa=False):
    """torch SDPA by one backend (FLASH_ATTENTION, CUDNN_ATTENTION) over [B, H, L, D] views."""
    with sdpa_kernel(be):
        return F.scaled_dot_product_attention(qs, ks, vs, is_causal=causal, enable_gqa=gqa)


if __name__ == "__main__":
    main()
