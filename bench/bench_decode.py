"""Decode benchmark on the GPU: flashserve's split-K decode over pages (through the C ABI) next
to PyTorch SDPA (flash and cuDNN backends, contiguous K/V, enable_gqa) and FlexAttention, all
on the same shapes in the same process. Every kernel is timed by CUDA-graph replay of a
sequence of calls that rotates among enough input copies to exceed the L2 cache, so the
numbers are GPU time and DRAM traffic, not launch overhead or cache hits. Our eager (no graph)
time is printed too. GB/s counts the K/V bytes each call must read; % is of the device-to-device
copy bandwidth (read + write) measured in the same run. The mixed batch's "flash" peer is
torch.nn.attention.varlen.varlen_attn (the same FlashAttention-2 kernels as SDPA's flash backend,
over packed K/V without padding, GQA native); SDPA and FlexAttention have no ragged form here.
Our pages are the project's layout (KVStorage's one pool [blocks, 2, kv_heads, page, head_dim]),
each sequence's blocks a random permutation of the pool.

Usage: python3 bench/bench_decode.py [--quick] [--no-flex] [--json FILE] [--variant NAME=LIB[:CTAS_PER_SM] ...]
(--variant: another build of libflashserve_c.so timed on the same rows, for A/B in one run; its
output's max difference from the main library's is printed as well.)"""
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

L2_BYTES = 60 * 2**20
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128


def copy_bandwidth():
    n = 2**30  # 1 GiB: read 1 GiB, write 1 GiB
    a = torch.empty(n, dtype=torch.uint8, device="cuda").random_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    torch.cuda.synchronize()
    times = []
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e) * 1e-3)
    times.sort()
    return 2 * n / times[len(times) // 2]


def capture_graph(fns):
    """A CUDA graph of ~40 calls rotating among fns (one per input copy), each fn run once first
    outside the capture (compilation, autotuning, handles); returns (graph, calls)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for f in fns:  # warm up (compilation, autotuning, handles) outside the capture
            f()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    calls = max(1, 40 // len(fns)) * len(fns)
    with torch.cuda.graph(g):
        for i in range(calls):
            fns[i % len(fns)]()
    return g, calls


def graph_time(fns, reps=3):
    """Median time of one call: capture all fns (one per input copy) in a graph, replay."""
    g, calls = capture_graph(fns)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps * 5):
        st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        st.record()
        g.replay()
        en.record()
        en.synchronize()
        times.append(st.elapsed_time(en) * 1e-3 / calls)
    times.sort()
    return times[len(times) // 2]


def eager_time(fns):
    for f in fns:
        f()
    torch.cuda.synchronize()
    calls = max(20, len(fns))
    st, en = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    st.record()
    for i in range(calls):
        fns[i % len(fns)]()
    en.record()
    en.synchronize()
    return st.elapsed_time(en) * 1e-3 / calls


def rotation_copies(lens):
    """Input copies a graph rotates among so its K/V (bf16) exceed the L2 four times (1..16)."""
    probe = 2 * sum(lens) * KV_HEADS * HEAD_DIM * 2
    return max(1, min(16, math.ceil(4 * L2_BYTES / probe)))


class Case:
    """One decode shape: `copies` independent caches (pages + contiguous) for rotation; q_len new
    tokens a sequence (more than 1: speculative decoding; ours only, no contiguous copies)."""

    def __init__(self, lens, page, dtype, copies, gen, q_len=1, order="scattered", pool="interleaved"):
        self.lens, self.page, self.dtype, self.q_len = lens, page, dtype, q_len
        self.batch = len(lens)
        pages_per_seq = [math.ceil(l / page) for l in lens]
        self.max_pages = max(pages_per_seq)
        self.kv_bytes = 2 * sum(lens) * KV_HEADS * HEAD_DIM * torch.tensor([], dtype=dtype).element_size()
        total_pages = sum(pages_per_seq)
        num_blocks = copies * total_pages + 1  # block 0: the null block
        if pool == "interleaved":  # the project's one pool [blocks, 2, kv_heads, page, head_dim] (KVStorage's)
            kv = torch.randn(num_blocks, 2, KV_HEADS, page, HEAD_DIM, dtype=dtype, device="cuda", generator=gen)
            self.k_pool, self.v_pool = kv[:, 0], kv[:, 1]
        elif pool == "headpaired":  # one pool [blocks, kv_heads, 2, page, head_dim]: a head's K and V adjacent
            kv = torch.randn(num_blocks, KV_HEADS, 2, page, HEAD_DIM, dtype=dtype, device="cuda", generator=gen)
            self.k_pool, self.v_pool = kv[:, :, 0], kv[:, :, 1]
        else:  # K and V pools [blocks, kv_heads, page, head_dim] apart (the project's layout to session 9)
            self.k_pool = torch.randn(num_blocks, KV_HEADS, page, HEAD_DIM, dtype=dtype, device="cuda", generator=gen)
            self.v_pool = torch.randn_like(self.k_pool)
        perm = torch.randperm(num_blocks - 1, generator=gen, device="cuda").to(torch.int32) + 1  # scattered
        if order == "sequential":  # a sequence's pages one after another in the pool (a diagnostic)
            perm = torch.arange(1, num_blocks, dtype=torch.int32, device="cuda")
        elif order in ("grouped", "ingroup"):  # diagnostics at 2 MiB granularity
            # grouped: random 2 MiB groups of consecutive blocks; ingroup: the groups in order, the
            # blocks random inside each (2 MiB locality kept, none beyond a block)
            per = max(1, 2**21 // (self.k_pool.stride(0) * self.k_pool.element_size()))  # blocks a 2 MiB
            n_groups = math.ceil((num_blocks - 1) / per)
            if order == "grouped":
                groups = torch.randperm(n_groups, generator=gen, device="cuda")
                inner = torch.arange(per, device="cuda").expand(n_groups, per)
            else:
                groups = torch.arange(n_groups, device="cuda")
                inner = torch.argsort(torch.rand(n_groups, per, generator=gen, device="cuda"), dim=1)
            perm = (groups[:, None] * per + inner).flatten()
            perm = (perm[perm < num_blocks - 1] + 1).to(torch.int32)
        self.tables, self.qs, self.os, self.lses, self.ks, self.vs = [], [], [], [], [], []
        self.packed = []  # ragged q_len 1: (k, v) packed [total keys, kv_heads, head_dim] a copy
        self.cu_k = torch.tensor([0] + lens, dtype=torch.int64).cumsum(0).to(torch.int32).cuda()
        self.seq_lens = torch.tensor(lens, dtype=torch.int32, device="cuda")
        uniform = len(set(lens)) == 1 and q_len == 1
        at = 0
        for c in range(copies):
            table = torch.zeros(self.batch, self.max_pages, dtype=torch.int32, device="cuda")
            for b, n in enumerate(pages_per_seq):
                ids = perm[at:at + n]
                # sorted: the scattered blocks, a sequence's in ascending order (a diagnostic: every
                # CTA then sweeps the pool from its start, the CTAs in flight in a narrow window)
                table[b, :n] = torch.sort(ids).values if order == "sorted" else ids
                at += n
            self.tables.append(table)
            self.qs.append(torch.randn(self.batch, q_len, HEADS, HEAD_DIM, dtype=dtype, device="cuda", generator=gen))
            self.os.append(torch.empty_like(self.qs[-1]))
            self.lses.append(torch.empty(self.batch, q_len, HEADS, dtype=torch.float32, device="cuda"))
            if uniform:  # the peers' contiguous [batch, kv_heads, len, head_dim] copies of the same keys
                L, idx = lens[0], table.long()
                contiguous = lambda pool: pool[idx].permute(0, 2, 1, 3, 4).reshape(  # noqa: E731
                    self.batch, KV_HEADS, -1, HEAD_DIM)[:, :, :L].contiguous()
                self.ks.append(contiguous(self.k_pool))
                self.vs.append(contiguous(self.v_pool))
            elif q_len == 1:  # the same keys packed [total keys, kv_heads, head_dim] for the varlen peer
                packed = lambda pool: torch.cat([  # noqa: E731
                    pool[table[b, :n].long()].permute(0, 2, 1, 3).reshape(-1, KV_HEADS, HEAD_DIM)[:lens[b]]
                    for b, n in enumerate(pages_per_seq)]).contiguous()
                self.packed.append((packed(self.k_pool), packed(self.v_pool)))


def fp8_pages(case, fmt="e4m3", per_tensor=False):
    """The case's pools in FP8 (issue 25): codes of K and V quantized per kv head (per_tensor:
    one scale for all heads, FlashInfer's kind) with scales amax / the format's max (vLLM's
    calculate_kv_scales), saturating; returned as (K codes, V codes, K scales, V scales (float32
    [kv_heads] each), the C ABI's dtype, the pool [blocks, 2, kv_heads, page, head_dim]). The same
    blocks, so every copy's block table serves."""
    (k, v, ks, vs, fs, kv) = fp8_pool(case.k_pool, case.v_pool, fmt, per_tensor)
    return k, v, ks, vs, fs, kv


def fp8_pool(k_pool, v_pool, fmt="e4m3", per_tensor=False):
    """16-bit pages [blocks, kv_heads, page, head_dim] in FP8: codes quantized per kv head (per_tensor:
    one scale for all heads) with scales amax / the format's max, saturating, as (K codes, V codes,
    K scales, V scales (float32 [kv_heads] each), the C ABI's dtype, the one pool [blocks, 2,
    kv_heads, page, head_dim] the codes are views of). bench_prefill.py's chunked row takes it too."""
    dt, mx, fs = ((torch.float8_e4m3fn, 448.0, fsc.FS_FP8_E4M3) if fmt == "e4m3"
                  else (torch.float8_e5m2, 57344.0, fsc.FS_FP8_E5M2))
    codes, scales = [], []
    for pool in (k_pool, v_pool):
        scale = (pool.float().abs().amax(dim=(0, 2, 3)) / mx).clamp_min(1e-12).contiguous()  # [kv_heads]
        if per_tensor:
            scale = scale.max().expand(pool.shape[1]).contiguous()
        codes.append((pool.float() / scale[None, :, None, None]).clamp(-mx, mx).to(dt))
        scales.append(scale)
    kv = torch.stack(codes, dim=1).contiguous()
    return kv[:, 0], kv[:, 1], scales[0], scales[1], fs, kv


def ours(lib, case, num_workers, min_pages=0, extra_ws=0, splits=None, fp8=None):
    """Our calls on the case's input copies, as planned for num_workers (splits: that many even
    splits instead of the plan's: the planner's graph mode for the longest sequence); fp8: the
    pages as fp8_pages gives them instead of the case's 16-bit pools."""
    plan = fsc.DecodePlan()
    lens = (fsc.ctypes.c_int32 * case.batch)(*case.lens)
    fsc.check(lib, lib.fs_decode_plan_create_for_pages(
        case.batch, fsc.ctypes.cast(lens, fsc.ctypes.c_void_p), case.q_len, HEADS, KV_HEADS, HEAD_DIM, case.page,
        num_workers, min_pages, splits or 64, int(splits is not None), max(case.lens) if splits else 0,
        fp8[4] if fp8 else 0, fsc.ctypes.byref(plan)), "plan")  # FP8 pages: their instance's CTAs an SM
    dtype = fsc.FS_BFLOAT16 if case.dtype == torch.bfloat16 else fsc.FS_FLOAT16
    fns, keep = [], []
    for c in range(len(case.tables)):
        ws = torch.empty(max(16, plan.workspace_bytes + extra_ws), dtype=torch.uint8, device="cuda")
        a = fsc.DecodeArgs()
        a.device, a.dtype, a.batch, a.q_len = fsc.FS_DEVICE_CUDA, dtype, case.batch, case.q_len
        a.num_heads, a.num_kv_heads, a.head_dim = HEADS, KV_HEADS, HEAD_DIM
        a.q, a.q_row_stride, a.q_head_stride = case.qs[c].data_ptr(), HEADS * HEAD_DIM, HEAD_DIM
        pg = a.pages
        k_pool, v_pool = (fp8[0], fp8[1]) if fp8 else (case.k_pool, case.v_pool)
        pg.k_pages, pg.v_pages = k_pool.data_ptr(), v_pool.data_ptr()
        pg.block_stride, pg.head_stride, pg.token_stride = k_pool.stride(0), k_pool.stride(1), HEAD_DIM
        pg.num_blocks, pg.block_size = k_pool.shape[0], case.page
        if fp8:
            pg.dtype, pg.k_scales, pg.v_scales = fp8[4], fp8[2].data_ptr(), fp8[3].data_ptr()
        pg.block_table, pg.block_table_stride = case.tables[c].data_ptr(), case.max_pages
        pg.seq_lens = case.seq_lens.data_ptr()
        a.mask.softmax_scale, a.mask.causal = 1.0 / math.sqrt(HEAD_DIM), 1
        a.mask.window_left = a.mask.window_right = -1
        a.o, a.o_row_stride, a.o_head_stride = case.os[c].data_ptr(), HEADS * HEAD_DIM, HEAD_DIM
        a.lse = case.lses[c].data_ptr()
        a.num_splits, a.pages_per_split = plan.num_splits, plan.pages_per_split
        a.workspace, a.workspace_bytes = ws.data_ptr(), plan.workspace_bytes + extra_ws
        keep += [ws, a]

        def run(a=a):
            fsc.check(lib, lib.fs_decode_run(fsc.ctypes.byref(a), torch.cuda.current_stream().cuda_stream), "decode")
        fns.append(run)
    if fp8:
        keep.append(fp8)  # the FP8 pool and scales live as long as the calls (trace_decode's timeline passed a temporary)
    return fns, keep, plan


def fa3_fns(case, fp8=None):
    """FA3's paged decode (flash_attn_with_kvcache, the wheel of scripts/gpu_peers.sh) over the
    case's keys copied into its page layout [blocks, page, kv_heads, head_dim] (the same block
    ids, so the case's tables serve): bf16, or with fp8 (fp8_pages' result) FA3's FP8 path, which
    takes q in e4m3 too (a per-tensor q scale a copy) and descales of shape (batch, kv_heads)."""
    from flash_attn_interface import flash_attn_with_kvcache
    to_fa3 = lambda pool: pool.permute(0, 2, 1, 3).contiguous()  # noqa: E731
    k, v = (to_fa3(fp8[0]), to_fa3(fp8[1])) if fp8 else (to_fa3(case.k_pool), to_fa3(case.v_pool))
    per_kv = lambda s: s[None, :].expand(case.batch, KV_HEADS).contiguous().float()  # noqa: E731
    k_d, v_d = (per_kv(fp8[2]), per_kv(fp8[3])) if fp8 else (None, None)
    fns, keep = [], [k, v, k_d, v_d]
    for c in range(len(case.tables)):
        q, q_d = case.qs[c], None
        if fp8:
            q_s = (q.float().abs().amax() / 448.0).clamp_min(1e-12)
            q, q_d = (q.float() / q_s).to(torch.float8_e4m3fn), q_s.reshape(1, 1).expand(case.batch, KV_HEADS).contiguous()
            keep += [q, q_d]

        def run(q=q, t=case.tables[c], q_d=q_d):
            return flash_attn_with_kvcache(q, k, v, cache_seqlens=case.seq_lens, page_table=t, causal=True,
                                           q_descale=q_d, k_descale=k_d, v_descale=v_d)
        fns.append(run)
    return fns, keep


def flashinfer_fns(case, fp8=None):
    """FlashInfer's paged decode (BatchDecodeWithPagedKVCacheWrapper with tensor cores, its fa2
    prefill path, whose JIT sources scripts/gpu_peers.sh carries) over our pool itself: its HND
    layout with a page's K and V in one tensor is ours, [blocks, 2, kv_heads, page, head_dim].
    fp8: fp8_pages(..., per_tensor=True) (FlashInfer's k_scale and v_scale are scalars)."""
    import flashinfer_shim  # noqa: F401  (the GPU machine's stand-ins for deps flashinfer lacks there)
    import flashinfer
    kv = fp8[5] if fp8 else torch.stack([case.k_pool, case.v_pool], dim=1)  # a copy, in our layout
    ws = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    pages = [math.ceil(n / case.page) for n in case.lens]
    indptr = torch.tensor([0] + pages, dtype=torch.int64).cumsum(0).to(torch.int32).cuda()
    last = torch.tensor([n - (p - 1) * case.page for n, p in zip(case.lens, pages)], dtype=torch.int32, device="cuda")
    fns, keep = [], [kv, ws]
    for c in range(len(case.tables)):
        indices = torch.cat([case.tables[c][b, :p] for b, p in enumerate(pages)]).contiguous()
        w = flashinfer.BatchDecodeWithPagedKVCacheWrapper(ws, kv_layout="HND", use_tensor_cores=True, backend="fa2")
        w.plan(indptr, indices, last, HEADS, KV_HEADS, HEAD_DIM, case.page, pos_encoding_mode="NONE",
               q_data_type=case.dtype, kv_data_type=kv.dtype)
        q = case.qs[c][:, 0].contiguous()  # [batch, heads, head_dim]
        scales = dict(k_scale=float(fp8[2][0]), v_scale=float(fp8[3][0])) if fp8 else {}
        keep += [indices, w, q]

        def run(w=w, q=q, scales=scales):
            return w.run(q, kv, **scales).unsqueeze(1)  # [batch, 1, heads, head_dim] like ours
        fns.append(run)
    return fns, keep


def sdpa_fns(case, backend):
    fns = []
    for c in range(len(case.ks)):
        q = case.qs[c].transpose(1, 2)  # [b, heads, 1, d]

        def run(q=q, k=case.ks[c], v=case.vs[c]):
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
        fns.append(run)
    return fns


def varlen_fns(case):
    """FlashAttention-2 over the packed ragged K/V (torch.nn.attention.varlen), one query a
    sequence; outputs [batch, heads, 1, head_dim] like sdpa_fns'."""
    from torch.nn.attention.varlen import varlen_attn
    cu_q = torch.arange(case.batch + 1, dtype=torch.int32, device="cuda")
    fns = []
    for c, (k, v) in enumerate(case.packed):
        q = case.qs[c][:, 0]  # [b, heads, d]

        def run(q=q, k=k, v=v):
            return varlen_attn(q, k, v, cu_q, case.cu_k, 1, max(case.lens)).unsqueeze(2)
        fns.append(run)
    return fns


_flex = None


def flex_fns(case):
    global _flex
    from torch.nn.attention.flex_attention import flex_attention
    if _flex is None:
        torch._dynamo.config.cache_size_limit = 64  # one compilation per shape
        _flex = torch.compile(flex_attention, dynamic=False)
    fns = []
    for c in range(len(case.ks)):
        q = case.qs[c].transpose(1, 2)

        def run(q=q, k=case.ks[c], v=case.vs[c]):
            return _flex(q, k, v, enable_gqa=True)
        fns.append(run)
    return fns


def max_err(case, ref_fn):
    ref = ref_fn().float()  # [b, heads, 1, d] from copy 0
    return (case.os[0].float().transpose(1, 2) - ref).abs().max().item()


def kernel_breakdown(fns):
    """GPU time per kernel name over one pass of fns, from the profiler (CUPTI)."""
    from torch.profiler import ProfilerActivity, profile
    for f in fns:
        f()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for f in fns:
            f()
        torch.cuda.synchronize()
    out = {}
    for e in prof.key_averages():
        if e.device_type.name == "CUDA" and e.count:
            out[e.key[:40]] = e.device_time_total / e.count  # us per call
    return out


def even_splits_gbps(lib, case, workers, counts):
    """Our GB/s on the case at each even split count of counts."""
    out = []
    for n in counts:
        fns, keep, _ = ours(lib, case, workers, splits=n)
        out.append(case.kv_bytes / graph_time(fns) / 1e9)
        del fns, keep
    return out


def split_sweep(lib, workers, make_case):
    """The batch rows (units that fill the GPU, where the planner does not split) at 1-4 even
    splits a sequence, each next to cuDNN."""
    print("split sweep: GB/s at 1..4 even splits (the planner's: 1), cuDNN")
    for batch, ctx in ((32, 4096), (64, 8192), (128, 2048), (256, 1024)):
        lens = [ctx] * batch
        case = make_case(lens)
        line = f"({batch},{ctx // 1024}k)".ljust(12)
        line += "".join(f"{g:8.0f}" for g in even_splits_gbps(lib, case, workers, (1, 2, 3, 4)))
        line += f"   cudnn {case.kv_bytes / graph_time(sdpa_fns(case, SDPBackend.CUDNN_ATTENTION)) / 1e9:6.0f}"
        print(line, flush=True)
        del case
        torch.cuda.empty_cache()


def q8_sweep(lib, workers, make_case):
    """The q8 rows (q_len 8 × GQA 4: two row blocks a kv head) at 1-8 even splits, the planner's
    choice first."""
    print("q8 sweep: GB/s at the planner's splits, then 1..8 even splits")
    for batch, ctx in ((8, 8192), (32, 4096)):
        lens = [ctx] * batch
        case = make_case(lens, q_len=8)
        fns, keep, plan = ours(lib, case, workers)
        line = f"({batch},{ctx // 1024}k) q8".ljust(14)
        line += f"planner {plan.num_splits}: {case.kv_bytes / graph_time(fns) / 1e9:6.0f} |"
        del fns, keep
        counts = range(1, 9)
        line += "".join(f" {n}: {g:5.0f}" for n, g in zip(counts, even_splits_gbps(lib, case, workers, counts)))
        print(line, flush=True)
        del case
        torch.cuda.empty_cache()


def sweep(lib, sms, make_case):
    """Ours at several split choices: the worker count and the minimum pages a split given to
    the planner (0: its default, 256 keys)."""
    print("sweep: shape, workers, min pages -> splits, us, GB/s; kernel breakdown (us per call)")
    for lens in ([4096], [32768], [131072], [8192] * 8, None):
        if lens is None:
            g = torch.Generator().manual_seed(7)
            lens = [int(x) for x in torch.randint(50, 16384, (24,), generator=g)] + [32768, 1, 17]
        case = make_case(lens)
        for workers in (sms, 2 * sms, 4 * sms):
            for min_pages in (0, 8, 4, 2):
                fns, keep, plan = ours(lib, case, workers, min_pages=min_pages)
                t = graph_time(fns)
                bd = kernel_breakdown(fns[:1]) if workers == 2 * sms and min_pages == 0 else {}
                print(f"  batch {len(lens)} max {max(lens)}: workers {workers:4d} min_pages {min_pages:2d} -> splits "
                      f"{plan.num_splits:3d} items {plan.work_items:5d}: {t * 1e6:8.1f} us "
                      f"{case.kv_bytes / t / 1e9:7.0f} GB/s {json.dumps(bd) if bd else ''}", flush=True)
        del case
        torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--no-flex", action="store_true")
    ap.add_argument("--json")
    ap.add_argument("--lib")
    ap.add_argument("--variant", action="append", default=[], metavar="NAME=LIB",
                    help="another build of the library, timed on the same rows (A/B)")
    ap.add_argument("--breakdown", action="store_true", help="GPU time per kernel of our call and of the SDPA peers' on each row (profiler)")
    ap.add_argument("--ctas-per-sm", type=int, default=2, help="resident split CTAs per SM (planner workers)")
    ap.add_argument("--sweep", action="store_true",
                    help="time ours at several worker counts (split choices) and print the kernel breakdown")
    ap.add_argument("--split-sweep", action="store_true", help="the batch rows at 1-4 even splits, next to cuDNN")
    ap.add_argument("--q8-sweep", action="store_true", help="the q8 rows at the planner's and 1-8 even splits")
    ap.add_argument("--only", action="append", default=[], metavar="LABEL", help="only the rows with this label")
    ap.add_argument("--fp8", choices=["e4m3", "e5m2"],
                    help="also time ours over FP8 pages of each bf16 row (issue 25): the same keys quantized per kv "
                         "head, in the same process right after the bf16 call; GB/s counts the FP8 bytes, x16 "
                         "is the token-rate gain over our bf16 pages")
    ap.add_argument("--page-order", choices=["scattered", "sequential", "grouped", "ingroup", "sorted"],
                    default="scattered",
                    help="block ids of the pages: a random permutation (the benchmark), each sequence's pages "
                         "consecutive, random 2 MiB groups of consecutive blocks, or the groups in order with "
                         "the blocks random inside each, or the scattered blocks in ascending order a "
                         "sequence (diagnostics)")
    ap.add_argument("--pool", choices=["interleaved", "separate", "headpaired"], default="interleaved",
                    help="the pages' layout: the project's one pool [blocks, 2, kv_heads, page, head_dim] (a block's "
                         "K and V adjacent), or (diagnostics) K and V pools apart, or [blocks, kv_heads, 2, page, "
                         "head_dim]")
    args = ap.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator(device="cuda").manual_seed(1234)
    lib = fsc.load(args.lib)
    # NAME=LIB[:CTAS_PER_SM]: the variant's planner gets CTAS_PER_SM × SMs workers (default: ours).
    variants = []
    for v in args.variant:
        name, rest = v.split("=", 1)
        path, _, ctas = rest.partition(":")
        variants.append((name, fsc.load(path), int(ctas) if ctas else args.ctas_per_sm))
    sms = fsc.ctypes.c_int32()
    fsc.check(lib, lib.fs_cuda_sm_count(0, fsc.ctypes.byref(sms)), "sm count")
    workers = args.ctas_per_sm * sms.value  # split CTAs resident per SM (registers, shared memory)
    copy_bw = copy_bandwidth()
    print(f"device {torch.cuda.get_device_name()}, {sms.value} SMs, copy bandwidth {copy_bw / 1e12:.3f} TB/s "
          f"(read+write), torch {torch.__version__}; pages: {args.pool} pool, {args.page_order}", flush=True)

    bf16, fp16 = torch.bfloat16, torch.float16
    # The sweeps' cases: bf16, page 16, the pages as the options say.
    make_case = lambda lens, q_len=1: Case(lens, 16, bf16, rotation_copies(lens), gen, q_len,  # noqa: E731
                                           args.page_order, args.pool)
    if args.sweep:
        sweep(lib, sms.value, make_case)
        return
    if args.split_sweep:
        split_sweep(lib, workers, make_case)
        return
    if args.q8_sweep:
        q8_sweep(lib, workers, make_case)
        return
    rows = [((1, 4096), 16, bf16), ((1, 32768), 16, bf16), ((1, 131072), 16, bf16), ((8, 8192), 16, bf16),
            ((32, 4096), 16, bf16), ((64, 8192), 16, bf16), ((128, 2048), 16, bf16), ((256, 1024), 16, bf16),
            ("mixed", 16, bf16), ((1, 32768), 64, bf16), ((32, 4096), 64, bf16), ((1, 32768), 16, fp16),
            ((64, 8192), 16, fp16),
            # Speculative decoding, 8 new tokens a sequence: 32 query rows a kv head, two row
            # blocks (CTAs) reading the same K/V; ours only (the peers' causal mask is not
            # bottom-right aligned for q_len > 1).
            ((8, 8192), 16, bf16, 8), ((32, 4096), 16, bf16, 8)]
    if args.quick:
        rows = [rows[0], rows[1], rows[4], rows[8]]
    results = []
    header = f"{'shape (batch,ctx)':<18}{'page':>5}{'dtype':>6}{'splits':>7}{'ours us':>9}{'GB/s':>7}{'%copy':>6}" \
             f"{'eager us':>9}{'flash GB/s':>11}{'cudnn GB/s':>11}{'flex GB/s':>10}{'x cudnn':>8}{'maxerr':>9}" + \
             "".join(f"{n + ' GB/s':>{max(10, len(n) + 6)}}{'diff':>8}" +
                     (f"{n + ' fp8 x16':>{max(10, len(n) + 9)}}" if args.fp8 else "") for n, _, _ in variants) + \
             (f"{'fp8 us':>9}{'fp8 GB/s':>9}{'%copy':>6}{'x16':>6}{'fp8 diff':>9}{'fa3 us':>8}{'fa3 fp8':>8}"
              f"{'fi us':>8}{'fi fp8':>8}{'x best fp8':>11}" if args.fp8 else "")
    for shape, page, dtype, *rest in rows:
        q_len = rest[0] if rest else 1
        if shape == "mixed":
            g = torch.Generator().manual_seed(7)
            lens = [int(x) for x in torch.randint(50, 16384, (24,), generator=g)] + [32768, 1, 17]
            label = f"mixed {len(lens)}"
        else:
            lens = [shape[1]] * shape[0]
            label = f"({shape[0]},{shape[1] // 1024}k)" + (f" q{q_len}" if q_len > 1 else "")
        if args.only and label not in args.only:
            continue
        copies = rotation_copies(lens)
        case = Case(lens, page, dtype, copies, gen, q_len, args.page_order, args.pool)
        fns, keep, plan = ours(lib, case, workers)
        t_ours = graph_time(fns)
        t_eager = eager_time(fns)
        r = {"shape": label, "page": page, "dtype": str(dtype).split(".")[-1], "splits": plan.num_splits,
             "ours_s": t_ours, "ours_gbps": case.kv_bytes / t_ours / 1e9, "eager_s": t_eager, "copies": copies}
        if args.fp8 and dtype == bf16:
            ref = case.os[0].float().clone()
            pages8 = fp8_pages(case, args.fp8)
            f8, k8, _ = ours(lib, case, workers, fp8=pages8)
            t8 = graph_time(f8)
            r["fp8_s"], r["fp8_gbps"] = t8, case.kv_bytes / 2 / t8 / 1e9
            r["fp8_speedup"] = t_ours / t8
            r["fp8_diff"] = (case.os[0].float() - ref).abs().max().item()  # against bf16 pages: quantization
            # FA3 and FlashInfer beside it, bf16 and FP8 pages (FA3's FP8 path quantizes q too;
            # FlashInfer's takes per-tensor scales), where their wheels are here.
            if args.fp8 == "e4m3" and q_len == 1:
                pages_pt = fp8_pages(case, args.fp8, per_tensor=True)
                for name, make, pages in (("fa3", fa3_fns, None), ("fa3_fp8", fa3_fns, pages8),
                                          ("fi", flashinfer_fns, None), ("fi_fp8", flashinfer_fns, pages_pt)):
                    try:
                        ff, fk = make(case, pages)
                        t = graph_time(ff)
                        r[name + "_s"] = t
                        r[name + "_diff"] = (ff[0]().float() - ref.reshape(ff[0]().shape)).abs().max().item()
                        del ff, fk
                    except Exception as e:  # noqa: BLE001  (no wheel, or a shape it does not take)
                        r[name + "_s"] = None
                        r[name + "_error"] = str(e).splitlines()[0][:120]
                del pages_pt
            del f8, k8, pages8
        if args.breakdown:
            r["kernels_us"] = kernel_breakdown(fns[:1])
        for name, vlib, vctas in variants:
            ref = case.os[0].clone()
            vfns, vkeep, _ = ours(vlib, case, vctas * sms.value)
            r[name + "_gbps"] = case.kv_bytes / graph_time(vfns) / 1e9
            r[name + "_diff"] = (case.os[0].float() - ref.float()).abs().max().item()
            del vfns, vkeep
            if args.fp8 and dtype == bf16:  # the variant over FP8 pages, against our bf16 pages
                p8 = fp8_pages(case, args.fp8)
                vf8, vk8, _ = ours(vlib, case, vctas * sms.value, fp8=p8)
                r[name + "_fp8_s"] = graph_time(vf8)
                r[name + "_fp8_speedup"] = t_ours / r[name + "_fp8_s"]
                del vf8, vk8, p8
        flash = (lambda: varlen_fns(case)) if case.packed else (lambda: sdpa_fns(case, SDPBackend.FLASH_ATTENTION))
        for name, make in (("flash", flash),
                           ("cudnn", lambda: sdpa_fns(case, SDPBackend.CUDNN_ATTENTION)),
                           ("flex", lambda: flex_fns(case))):
            if not (case.ks or (case.packed and name == "flash")) or (name == "flex" and args.no_flex):
                r[name + "_gbps"] = None
                continue
            try:
                pf = make()
                t = graph_time(pf)
                r[name + "_gbps"] = case.kv_bytes / t / 1e9
                if args.breakdown and name != "flex":
                    r[name + "_kernels_us"] = kernel_breakdown(pf[:1])
                if name == "flash":
                    r["maxerr"] = max_err(case, pf[0])
            except Exception as e:  # a peer that does not run this shape: say so, go on
                r[name + "_gbps"] = None
                r[name + "_error"] = str(e).splitlines()[0][:120]
        results.append(r)
        del case, fns, keep
        torch.cuda.empty_cache()
        print(json.dumps(r), flush=True)

    print()
    print(header)
    fmt = lambda v, w, p=0: f"{v:>{w}.{p}f}" if v is not None else f"{'n/a':>{w}}"  # noqa: E731
    for r in results:
        ratio = r["ours_gbps"] / r["cudnn_gbps"] if r.get("cudnn_gbps") else None
        print(f"{r['shape']:<18}{r['page']:>5}{r['dtype']:>6}{r['splits']:>7}{fmt(r['ours_s'] * 1e6, 9, 1)}"
              f"{fmt(r['ours_gbps'], 7)}{fmt(100 * r['ours_gbps'] * 1e9 / copy_bw, 6)}{fmt(r['eager_s'] * 1e6, 9, 1)}"
              f"{fmt(r.get('flash_gbps'), 11)}{fmt(r.get('cudnn_gbps'), 11)}{fmt(r.get('flex_gbps'), 10)}"
              f"{fmt(ratio, 8, 3)}{fmt(r.get('maxerr'), 9, 4)}" +
              "".join(f"{fmt(r.get(n + '_gbps'), max(10, len(n) + 6))}{fmt(r.get(n + '_diff'), 8, 4)}" +
                      (fmt(r.get(n + '_fp8_speedup'), max(10, len(n) + 9), 2) if args.fp8 else "")
                      for n, _, _ in variants) +
              (f"{fmt(r['fp8_s'] * 1e6, 9, 1)}{fmt(r['fp8_gbps'], 9)}{fmt(100 * r['fp8_gbps'] * 1e9 / copy_bw, 6)}"
               f"{fmt(r['fp8_speedup'], 6, 2)}{fmt(r['fp8_diff'], 9, 4)}"
               f"{fmt(r['fa3_s'] * 1e6 if r.get('fa3_s') else None, 8, 1)}"
               f"{fmt(r['fa3_fp8_s'] * 1e6 if r.get('fa3_fp8_s') else None, 8, 1)}"
               f"{fmt(r['fi_s'] * 1e6 if r.get('fi_s') else None, 8, 1)}"
               f"{fmt(r['fi_fp8_s'] * 1e6 if r.get('fi_fp8_s') else None, 8, 1)}"
               f"{fmt(min([r[k] for k in ('fa3_fp8_s', 'fi_fp8_s') if r.get(k)], default=0) / r['fp8_s'] or None, 11, 2)}"
               if args.fp8 and "fp8_s" in r else ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"copy_bandwidth": copy_bw, "pool": args.pool, "page_order": args.page_order, "rows": results}, f,
                      indent=1)


if __name__ == "__main__":
    main()
