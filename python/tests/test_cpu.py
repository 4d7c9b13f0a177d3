"""The Python binding on the CPU with numpy: varlen and paged prefill, decode and merge against a
float64 numpy reference on random odd shapes (fixed seeds), and the argument checks. Prints
"N passed, N failed"; exit 1 on a failure."""
import sys
import traceback

import numpy as np

import flashserve

passed = failed = 0


def case(fn):
    global passed, failed
    try:
        fn()
        passed += 1
    except Exception:
        failed += 1
        print(f"FAILED: {fn.__name__}")
        traceback.print_exc()
    return fn


def reference(q, k, v, q_lens, k_lens, causal, scale):
    """float64 attention per sequence; q [total_q, H, D], k/v [total_k, Hkv, D]."""
    H, Hk = q.shape[1], k.shape[1]
    out = np.zeros(q.shape, dtype=np.float64)
    lse = np.full(q.shape[:2], -np.inf)
    qo = ko = 0
    for ql, kl in zip(q_lens, k_lens):
        for h in range(H):
            kh = h // (H // Hk)
            s = q[qo:qo + ql, h].astype(np.float64) @ k[ko:ko + kl, kh].astype(np.float64).T * scale
            if causal:
                pos = kl - ql + np.arange(ql)[:, None]
                s = np.where(np.arange(kl)[None, :] <= pos, s, -np.inf)
            m = s.max(axis=1, keepdims=True)
            ok = np.isfinite(m[:, 0])
            p = np.where(ok[:, None], np.exp(s - np.where(ok[:, None], m, 0)), 0)
            den = p.sum(axis=1, keepdims=True)
            out[qo:qo + ql, h] = np.where(ok[:, None], p @ v[ko:ko + kl, kh] / np.where(den > 0, den, 1), 0)
            lse[qo:qo + ql, h] = np.where(ok, m[:, 0] + np.log(np.where(den[:, 0] > 0, den[:, 0], 1)), -np.inf)
        qo += ql
        ko += kl
    return out, lse


rng = np.random.default_rng(7)
Q_LENS, K_LENS, H, HK, D = [7, 1, 77], [77, 257, 77], 8, 2, 80


def packed():
    q = rng.standard_normal((sum(Q_LENS), H, D)).astype(np.float32)
    k = rng.standard_normal((sum(K_LENS), HK, D)).astype(np.float32)
    v = rng.standard_normal((sum(K_LENS), HK, D)).astype(np.float32)
    cu_q = np.array([0] + list(np.cumsum(Q_LENS)), dtype=np.int32)
    cu_k = np.array([0] + list(np.cumsum(K_LENS)), dtype=np.int32)
    return q, k, v, cu_q, cu_k


def to_pages(k, v, k_lens, bs):
    blocks = sum((kl + bs - 1) // bs for kl in k_lens) + 1
    kc = np.full((blocks, HK, bs, D), np.nan, dtype=np.float32)
    vc = kc.copy()
    perm = rng.permutation(blocks - 1) + 1
    table = np.zeros((len(k_lens), max((kl + bs - 1) // bs for kl in k_lens)), dtype=np.int32)
    at = start = 0
    for b, kl in enumerate(k_lens):
        for j in range(kl):
            if j % bs == 0:
                table[b, j // bs] = perm[at]
                at += 1
            kc[table[b, j // bs], :, j % bs] = k[start + j]
            vc[table[b, j // bs], :, j % bs] = v[start + j]
        start += kl
    return kc, vc, table, np.array(k_lens, dtype=np.int32)


@case
def varlen_prefill_matches_reference():
    q, k, v, cu_q, cu_k = packed()
    for causal in (False, True):
        o, lse = flashserve.varlen_prefill(q, k, v, cu_q, cu_k, causal=causal, return_lse=True)
        ro, rl = reference(q, k, v, Q_LENS, K_LENS, causal, 1 / np.sqrt(D))
        assert np.abs(o - ro).max() < 1e-4, np.abs(o - ro).max()
        assert np.allclose(lse, rl, atol=1e-4)


@case
def paged_prefill_equals_packed():
    q, k, v, cu_q, cu_k = packed()
    kc, vc, table, lens = to_pages(k, v, K_LENS, 16)
    o = flashserve.paged_prefill(q, kc, vc, cu_q, table, lens, causal=True)
    ro = flashserve.varlen_prefill(q, k, v, cu_q, cu_k, causal=True)
    assert np.array_equal(o, ro)


@case
def decode_matches_reference():
    lens = [1, 16, 300, 1025]
    q = rng.standard_normal((len(lens), 2, H, D)).astype(np.float32)
    lens = [max(x, 2) for x in lens]
    k = rng.standard_normal((sum(lens), HK, D)).astype(np.float32)
    v = rng.standard_normal((sum(lens), HK, D)).astype(np.float32)
    kc, vc, table, seq_lens = to_pages(k, v, lens, 16)
    o = flashserve.decode(q, kc, vc, table, seq_lens)
    ro, _ = reference(q.reshape(-1, H, D), k, v, [2] * len(lens), lens, True, 1 / np.sqrt(D))
    assert np.abs(o.reshape(-1, H, D) - ro).max() < 1e-4


@case
def merge_of_halves_is_the_whole():
    q, k, v, cu_q, cu_k = packed()
    half = np.array([0, 40], dtype=np.int32)
    qs, ks, vs = q[:7], k[:77], v[:77]
    cq = np.array([0, 7], dtype=np.int32)
    oa, la = flashserve.varlen_prefill(qs, ks[:40], vs[:40], cq, half, return_lse=True)
    ob, lb = flashserve.varlen_prefill(qs, ks[40:], vs[40:], cq, np.array([0, 37], dtype=np.int32), return_lse=True)
    o, lse = flashserve.merge_states(oa, la, ob, lb)
    ro, rl = flashserve.varlen_prefill(qs, ks, vs, cq, np.array([0, 77], dtype=np.int32), return_lse=True)
    assert np.abs(o - ro).max() < 1e-5 and np.abs(lse - rl).max() < 1e-5


def raises(exc, fn, needle):
    try:
        fn()
    except exc as e:
        assert needle in str(e), f"message {e!r} lacks {needle!r}"
        return
    raise AssertionError(f"no {exc.__name__}")


@case
def bad_arguments_are_clear_errors():
    q, k, v, cu_q, cu_k = packed()
    raises(TypeError, lambda: flashserve.varlen_prefill(q.astype(np.float64), k, v, cu_q, cu_k), "q: expected float32")
    raises(TypeError, lambda: flashserve.varlen_prefill(q, k, v, cu_q.astype(np.int64), cu_k), "cu_seqlens_q: expected int32")
    raises(ValueError, lambda: flashserve.varlen_prefill(q[0], k, v, cu_q, cu_k), "q: expected 3 dimensions")
    raises(ValueError, lambda: flashserve.varlen_prefill(q, k, v, cu_q, cu_k[:2]), "cu_seqlens_k: expected 4 entries")
    raises(TypeError, lambda: flashserve.varlen_prefill(q, k.astype(np.float16), v, cu_q, cu_k), "share a dtype")
    raises(TypeError, lambda: flashserve.varlen_prefill([1, 2], k, v, cu_q, cu_k), "numpy array or a torch tensor")
    bad = cu_q.copy()
    bad[1] = 100  # past total_q: the library's own check
    raises(flashserve.FlashserveError, lambda: flashserve.varlen_prefill(q, k, v, bad, cu_k), "cu_seqlens_q")
    k5 = np.ascontiguousarray(np.repeat(k, 1, axis=1))
    raises(flashserve.FlashserveError,
           lambda: flashserve.varlen_prefill(q[:, :5], k5[:, :2], v[:, :2], cu_q, cu_k), "not a multiple")


def cache_round_trip(dtype, tol):
    """BlockManager hands out slots, KVCache takes the K/V, decode reads them back through the
    layer's pools and the block table: equal to float64 attention over the appended data."""
    L, NB, BS, prompt_len = 2, 40, 8, 37
    bm = flashserve.BlockManager(NB, BS)
    kv = flashserve.KVCache(L, NB, HK, D, block_size=BS, dtype=dtype)
    prompt = rng.integers(0, 30000, prompt_len).astype(np.int32)
    assert bm.add_sequence(5, prompt) == 0
    slots, copies = bm.allocate_slots(5, prompt_len)
    assert copies == [] and len(slots) == prompt_len
    k = rng.standard_normal((L, prompt_len, HK, D)).astype(dtype)
    v = rng.standard_normal((L, prompt_len, HK, D)).astype(dtype)
    kv.append(k, v, slots)
    table = bm.block_table(5)
    assert len(table) == (prompt_len + BS - 1) // BS

    def check(seq_table, n, keys, vals, layer):
        kc, vc = kv.layer(layer)
        q = rng.standard_normal((1, 1, H, D)).astype(dtype)
        o = flashserve.decode(q, kc, vc, seq_table[None, :].astype(np.int32), np.array([n], dtype=np.int32))
        ro, _ = reference(q.reshape(-1, H, D).astype(np.float32), keys.astype(np.float32), vals.astype(np.float32),
                          [1], [n], True, 1 / np.sqrt(D))
        err = np.abs(o.reshape(-1, H, D).astype(np.float64) - ro).max()
        assert err < tol, f"{dtype} layer {layer}: max error {err}"

    for layer in range(L):
        check(table, prompt_len, k[layer], v[layer], layer)
    # The same prompt again: its full blocks come from the prefix cache.
    assert bm.add_sequence(6, prompt) == (prompt_len // BS) * BS
    bm.free(6)
    # Fork and a decode step of the child: copy-on-write of the shared partial block.
    bm.fork(5, 9)
    slot9, copies = bm.allocate_slots(9, 1, new_tokens=[4242])
    assert len(copies) == 1 and copies[0][0] == table[-1]
    kv.copy_blocks(copies)
    k1 = rng.standard_normal((L, 1, HK, D)).astype(dtype)
    v1 = rng.standard_normal((L, 1, HK, D)).astype(dtype)
    kv.append(k1, v1, slot9)
    table9 = bm.block_table(9)
    for layer in range(L):
        check(table9, prompt_len + 1, np.concatenate([k[layer], k1[layer]]), np.concatenate([v[layer], v1[layer]]),
              layer)
        check(table, prompt_len, k[layer], v[layer], layer)  # the parent is untouched
    # Out of blocks is its own exception and changes nothing.
    free = bm.stats()["num_free_blocks"]
    bm.add_sequence(11, rng.integers(0, 30000, 300).astype(np.int32))
    raises(flashserve.OutOfBlocks, lambda: bm.allocate_slots(11, 300), "RESOURCE_EXHAUSTED")
    assert bm.stats()["num_free_blocks"] == free
    # Bad input: clear errors, nothing written.
    raises(TypeError, lambda: kv.append(k.astype(np.float64), v.astype(np.float64), slots), "expected " + dtype)
    raises(ValueError, lambda: kv.append(k[:, :, :1], v[:, :, :1], slots), "expected [..., n")
    raises(ValueError, lambda: kv.append(k, v, slots.astype(np.int32)), "slots: expected int64")
    raises(ValueError, lambda: kv.append(k, v, slots.astype(np.uint64)), "slots: expected int64")
    kv.copy_blocks(np.zeros((0, 2), dtype=np.int32))  # nothing to copy
    bad = slots.copy()
    bad[3] = NB * BS
    raises(flashserve.FlashserveError, lambda: kv.append(k, v, bad), "OUT_OF_RANGE")
    check(table, prompt_len, k[0], v[0], 0)
    raises(flashserve.FlashserveError, lambda: kv.copy_blocks([(1, NB)]), "OUT_OF_RANGE")
    kc, vc = kv.layer(0)  # strided views of one pool; a contiguous copy of V has other strides
    raises(ValueError, lambda: flashserve.decode(rng.standard_normal((1, 1, H, D)).astype(dtype), kc,
                                                 np.ascontiguousarray(vc), table[None, :].astype(np.int32),
                                                 np.array([prompt_len], dtype=np.int32)), "strides")
    raises(flashserve.FlashserveError, lambda: bm.free(12345), "12345")
    raises(flashserve.FlashserveError, lambda: kv.layer(L), "layer")
    raises(TypeError, lambda: flashserve.KVCache(1, 4, 1, 8, dtype="int8"), "dtype")
    # A pool outlives its KVCache object, even a closed one: the view keeps the memory.
    small = flashserve.KVCache(1, 3, HK, D, block_size=BS, dtype=dtype)
    kc0, _ = small.layer(0)
    small.close()
    raises(ValueError, lambda: small.layer(0), "closed")
    del small
    import gc
    gc.collect()
    kc0[...] = 1
    assert float(kc0.sum()) == kc0.size
    for seq in (5, 9, 11):
        bm.free(seq)
    st = bm.stats()
    assert st["num_free_blocks"] == st["num_usable_blocks"] and st["num_sequences"] == 0


@case
def block_manager_and_kv_cache_float32():
    cache_round_trip("float32", 1e-4)


@case
def block_manager_and_kv_cache_float16():
    cache_round_trip("float16", 2e-2)


def fp8_values(fmt):
    """The 256 codes' values of fp8_e4m3 (bias 7, S.1111.111 NaN) or fp8_e5m2 (bias 15, IEEE-like)."""
    c = np.arange(256)
    mbits, bias = (3, 7) if fmt == "fp8_e4m3" else (2, 15)
    e, m = (c & 0x7f) >> mbits, c & ((1 << mbits) - 1)
    mag = np.where(e == 0, np.ldexp(m.astype(np.float64), 1 - bias - mbits),
                   np.ldexp(((1 << mbits) + m).astype(np.float64), e - bias - mbits))
    val = np.where(c & 0x80, -mag, mag)
    bad = (c & 0x7f) == 0x7f if fmt == "fp8_e4m3" else e == 31
    return val, np.flatnonzero(~bad)


@case
def decode_and_paged_prefill_over_fp8_codes():
    # uint8 caches of FP8 codes (kv_dtype names the format) with per-kv-head scales; free slots
    # hold NaN codes (never read). Against float64 over the dequantized values.
    for fmt in ("fp8_e4m3", "fp8_e5m2"):
        val, ok = fp8_values(fmt)
        lens = [3, 41, 130]
        kcodes = ok[rng.integers(0, len(ok), (sum(lens), HK, D))].astype(np.uint8)
        vcodes = ok[rng.integers(0, len(ok), (sum(lens), HK, D))].astype(np.uint8)
        ks = (rng.uniform(0.5, 2.0, HK) / np.abs(val[ok]).max() * 4).astype(np.float32)
        vs = (rng.uniform(0.5, 2.0, HK) / np.abs(val[ok]).max() * 4).astype(np.float32)
        k = (val[kcodes] * ks[None, :, None]).astype(np.float64)
        v = (val[vcodes] * vs[None, :, None]).astype(np.float64)
        kf, vf, table, seq_lens = to_pages(kcodes.astype(np.float32), vcodes.astype(np.float32), lens, 16)
        nan_code = 0x7f
        kc = np.where(np.isnan(kf), nan_code, kf).astype(np.uint8)
        vc = np.where(np.isnan(vf), nan_code, vf).astype(np.uint8)
        q = rng.standard_normal((len(lens), 1, H, D)).astype(np.float32)
        o = flashserve.decode(q, kc, vc, table, seq_lens, kv_dtype=fmt, k_scales=ks, v_scales=vs)
        ro, _ = reference(q.reshape(-1, H, D), k, v, [1] * len(lens), lens, True, 1 / np.sqrt(D))
        assert np.abs(o.reshape(-1, H, D) - ro).max() < 1e-4, (fmt, np.abs(o.reshape(-1, H, D) - ro).max())
        qp = rng.standard_normal((sum([2, 5, 7]), H, D)).astype(np.float32)
        cu_q = np.array([0, 2, 7, 14], dtype=np.int32)
        op = flashserve.paged_prefill(qp, kc, vc, cu_q, table, seq_lens, kv_dtype=fmt, k_scales=ks, v_scales=vs)
        rp, _ = reference(qp, k, v, [2, 5, 7], lens, True, 1 / np.sqrt(D))
        assert np.abs(op - rp).max() < 1e-4, (fmt, np.abs(op - rp).max())
        raises(ValueError, lambda: flashserve.decode(q, kc, vc, table, seq_lens, kv_dtype=fmt, k_scales=ks),
               "FP8 caches need v_scales")
        raises(ValueError, lambda: flashserve.decode(q, kc, vc, table, seq_lens, kv_dtype=fmt, k_scales=ks[:1],
                                                     v_scales=vs), "k_scales: expected float32 [2]")
        raises(TypeError, lambda: flashserve.decode(q, kc, vc, table, seq_lens, k_scales=ks, v_scales=vs),
               "kv_dtype must be one of")
        raises(flashserve.FlashserveError, lambda: flashserve.decode(q, kc, vc, table, seq_lens, kv_dtype=fmt,
                                                                     k_scales=-ks, v_scales=vs), "must be finite and > 0")
    kf = rng.standard_normal((4, HK, 16, D)).astype(np.float32)
    raises(ValueError, lambda: flashserve.decode(rng.standard_normal((1, 1, H, D)).astype(np.float32), kf, kf,
                                                 np.ones((1, 1), np.int32), np.array([3], np.int32),
                                                 k_scales=np.ones(HK, np.float32), v_scales=np.ones(HK, np.float32)),
           "k_scales/v_scales are for FP8 caches")


@case
def fp8_kv_cache_quantizes_and_decodes():
    # KVCache in FP8: per-(layer, kv head) scales from amax, float32 / float16 K/V quantized on
    # append, decode through page_args against float64 over the dequantized pages (the kernel)
    # and over the original values (what quantization costs); copy-on-write copies codes.
    L, NB, BS, n = 2, 24, 16, 45
    for fmt, fmax, rel in (("fp8_e4m3", 448.0, 2.0 ** -4), ("fp8_e5m2", 57344.0, 2.0 ** -3)):
        values, good = fp8_values(fmt)
        values = np.where(np.isin(np.arange(256), good), values, np.nan)  # NaN codes decode to NaN
        bm = flashserve.BlockManager(NB, BS)
        kv = flashserve.KVCache(L, NB, HK, D, block_size=BS, dtype=fmt)
        k = (rng.standard_normal((L, n, HK, D)) * rng.uniform(0.5, 3.0, (1, 1, HK, 1))).astype(np.float32)
        v = rng.standard_normal((L, n, HK, D)).astype(np.float32)
        k[0, 3, 1, 5] = np.nan  # NaN stays NaN in its code; that key's row is then NaN for head 1
        for layer in range(L):
            assert np.array_equal(kv.scales(layer)[0], np.ones(HK, np.float32))  # 1.0 until set
            ka, va = np.nanmax(np.abs(k[layer]), axis=(0, 2)), np.abs(v[layer]).max(axis=(0, 2))
            kv.set_scales(layer, ka / fmax, va / fmax)
            ks, vs = kv.scales(layer)
            assert np.allclose(ks, ka / fmax) and np.allclose(vs, va / fmax)
        assert bm.add_sequence(3, rng.integers(0, 30000, n).astype(np.int32)) == 0
        slots, _ = bm.allocate_slots(3, n)
        kv.append(k, v, slots)
        table = bm.block_table(3)[None, :].astype(np.int32)
        seq = np.array([n], dtype=np.int32)
        for layer in range(L):
            kc, vc = kv.layer(layer)
            assert kc.dtype == np.uint8 and kc.shape == (NB, HK, BS, D)
            ks, vs = kv.scales(layer)
            rows = [(b, t) for b in table[0] for t in range(BS)][:n]
            kd = np.stack([values[kc[b, :, t]] for b, t in rows]) * ks[None, :, None]  # [n, HK, D] float64
            vd = np.stack([values[vc[b, :, t]] for b, t in rows]) * vs[None, :, None]
            orig_k, orig_v = k[layer].astype(np.float64), v[layer].astype(np.float64)
            finite = np.isfinite(orig_k)
            assert np.isnan(kd[~finite]).all() and (layer == 0) == (not finite.all())
            # Round to nearest: within half a step (relative rel) of the original, or the
            # subnormal step near zero.
            for d, x, sc in ((kd, orig_k, ks), (vd, orig_v, vs)):
                ok = np.isfinite(x)
                tiny = sc[None, :, None] * np.nanmin(values[values > 0])
                err = np.abs(d - x)
                bound = rel * np.abs(x) + np.broadcast_to(tiny, x.shape)
                assert (err[ok] <= bound[ok] * (1 + 1e-6)).all(), (fmt, float((err - bound)[ok].max()))
            q = rng.standard_normal((1, 1, H, D)).astype(np.float32)
            o = flashserve.decode(q, kc, vc, table, seq, **kv.page_args(layer))
            heads_ok = [h for h in range(H) if np.isfinite(kd[:, h * HK // H]).all()]
            ro, _ = reference(q.reshape(-1, H, D), np.nan_to_num(kd), vd, [1], [n], True, 1 / np.sqrt(D))
            o = o.reshape(-1, H, D)
            assert np.abs(o[:, heads_ok] - ro[:, heads_ok]).max() < 1e-4, (fmt, layer)
            if layer == 0:
                assert np.isnan(o[:, [h for h in range(H) if h not in heads_ok]]).all()
            else:
                rq, _ = reference(q.reshape(-1, H, D), orig_k, orig_v, [1], [n], True, 1 / np.sqrt(D))
                print(f"  {fmt} decode vs float64 over the original values: max |o| error "
                      f"{np.abs(o - rq).max():.4f}")
        # float16 K/V into the same cache; copy-on-write copies the codes of every layer.
        bm.fork(3, 4)
        s4, copies = bm.allocate_slots(4, 1, new_tokens=[77])
        kv.copy_blocks(copies)
        kv.append(k[:, :1].astype(np.float16), v[:, :1].astype(np.float16), s4)
        for layer in range(L):
            kc, _ = kv.layer(layer)
            (src, dst), = copies
            assert np.array_equal(kc[dst, :, :(n % BS)], kc[src, :, :(n % BS)])
        # Bad input: clear errors, nothing written.
        before = kv.layer(1)[0].copy()
        raises(ValueError, lambda: kv.set_scales(0, np.ones(HK + 1, np.float32), np.ones(HK, np.float32)),
               f"k_scales: expected float32 [{HK}]")
        raises(flashserve.FlashserveError, lambda: kv.set_scales(0, -np.ones(HK, np.float32), np.ones(HK, np.float32)),
               "scale")
        raises(flashserve.FlashserveError, lambda: kv.set_scales(0, np.full(HK, np.nan, np.float32),
                                                                 np.ones(HK, np.float32)), "scale")
        raises(TypeError, lambda: kv.append(k.astype(np.float64), v.astype(np.float64), slots),
               "expected float32, float16 or bfloat16")
        raises(TypeError, lambda: kv.append(k, v.astype(np.float16), slots), "differ")
        assert np.array_equal(kv.layer(1)[0], before)
    raises(TypeError, lambda: flashserve.KVCache(1, 4, HK, D, dtype="float32").set_scales(0, [1.0], [1.0]),
           "not FP8")
    assert flashserve.KVCache(1, 4, HK, D, dtype="float32").page_args(0) == {}
    # float32 into a float16 cache on the CPU (the library's conversion): the same as appending
    # the float16 values.
    a, b = flashserve.KVCache(1, 4, HK, D, block_size=BS, dtype="float16"), \
        flashserve.KVCache(1, 4, HK, D, block_size=BS, dtype="float16")
    x = rng.standard_normal((1, 5, HK, D)).astype(np.float32)
    sl = np.arange(BS, BS + 5, dtype=np.int64)
    a.append(x, x, sl)
    b.append(x.astype(np.float16), x.astype(np.float16), sl)
    assert np.array_equal(a.layer(0)[0], b.layer(0)[0])

print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
