// The warp-specialized prefill kernel's work orders (prefill_sm90_ws_kernel.cuh): which item
// (q tile, query head, sequence) the walk takes at each step. Pure functions of a few integers,
// host and device alike, so that tests/test_prefill_work_order.cc checks them without a GPU.
#pragma once

#include <cstdint>

#include "common/host_device.h"

namespace flashserve::cuda {

FS_HOST_DEVICE int ws_min(int a, int b) { return a < b ? a : b; }

// The q tiles of block_m rows of a sequence of q_len queries, at most num_m (the grid's: rows
// past max_seqlen_q are not computed) and none for q_len <= 0.
FS_HOST_DEVICE int ws_q_tiles(int q_len, int block_m, int num_m) {
  return q_len > 0 ? ws_min(num_m, (q_len + block_m - 1) / block_m) : 0;
}

// The zigzag permutation of a section's positions (session 54; WsWorkOrder::zig_index and
// WsVarlenOrder's zigzag): `within` < n · num_m of a section of n pairs (or heads) with num_m q
// tiles each, in units (positions 2u, 2u + 1) of a pair's i-th longest and i-th shortest q tile
// (pairs fastest), then, where num_m is odd, the middle tiles; gives the q tile's rank (0: the
// longest, num_m - 1) and the pair within the section (p >= n: past the section's items).
FS_HOST_DEVICE void ws_zig_rank(int within, int n, int num_m, int& rank, int& p) {
  const int half = num_m / 2, in_units = 2 * n * half;
  if (within < in_units) {
    const int u = within >> 1, i = u / n;
    p = u - i * n;
    rank = (within & 1) != 0 ? num_m - 1 - i : i;
  } else {
    p = (num_m & 1) != 0 ? within - in_units : n;  // the middle tiles (num_m odd), then nothing
    rank = half;
  }
}

// The grid order of the work items w = 0, 1, ... < num_m · pairs (CTAs are dispatched in that
// order; the persistent walk takes them in it too): the (query head, sequence) pairs (pair = b ·
// heads + h) in sections of `section` pairs, chosen on the host so that a section's K and V fit
// in the L2 (prefill_cuda.cu); inside a section the q tiles longest first (causal: the most keys;
// FA3's longest-processing-time order), the section's pairs fastest. The CTAs running at one
// time then share their K/V through the L2: with the q tile slowest over all pairs (section =
// all), 16×1k at d 128 read each sequence's K/V from HBM once a CTA (16 MB of K/V against 60 MB
// of L2, 2048 CTAs). num_m is the longest sequence's q tiles, so a shorter sequence's items past
// its queries are in the order too (the kernel skips them).
struct WsWorkOrder {
  int num_m, pairs, section;
  FS_HOST_DEVICE void item(int w, int& m_tile, int& pair) const {
    const int per_section = section * num_m;
    const int sec = w / per_section, first = sec * section;
    const int n = ws_min(section, pairs - first);  // the last section may be short
    const int within = w - sec * per_section;
    m_tile = num_m - 1 - within / n;
    pair = first + within % n;
  }
  // The item w of (m_tile, pair): item's inverse.
  FS_HOST_DEVICE int index(int m_tile, int pair) const {
    const int sec = pair / section, first = sec * section;
    const int n = ws_min(section, pairs - first);
    return sec * section * num_m + (num_m - 1 - m_tile) * n + (pair - first);
  }

  // The zigzag order of the static walk over causal rows of one length (session 54; the kernel's
  // walk comment): positions z = 0, 1, ... < zig_items(), taken two at a time by a CTA (units
  // 2u, 2u + 1: zig_first / zig_next). A section's positions are its pairs' q tiles in units of
  // a long and a short one of the same pair (the i-th longest beside the i-th shortest, pairs
  // fastest), then, where num_m is odd, the pairs' middle tiles two by two, and one position of
  // padding where the section's items are odd (no item: -1), so that every section starts a unit.
  // A causal unit then holds about num_m + 1 key tiles whichever it is, where the round-robin
  // walk over the grid order's sawtooth of item sizes gave one CTA 2.6 times another's work
  // (16x1k at d 128: 104 tiles against 40, the mean 70). Returns the grid order's item (index),
  // or -1 at a padding position.
  FS_HOST_DEVICE int zig_section_items(int n) const { return (n * num_m + 1) & ~1; }
  FS_HOST_DEVICE int zig_items() const {
    const int full_sections = (pairs - 1) / section;  // every section but the last
    return full_sections * zig_section_items(section) + zig_section_items(pairs - full_sections * section);
  }
  FS_HOST_DEVICE int zig_index(int z) const {
    const int per_section = zig_section_items(section);
    const int sec = z / per_section, first = sec * section;
    const int n = ws_min(section, pairs - first);
    int rank, p;  // rank 0: the longest q tile (num_m - 1)
    ws_zig_rank(z - sec * per_section, n, num_m, rank, p);
    return p < n ? first * num_m + rank * n + p : -1;  // (p >= n: the padding)
  }
  // CTA c of a grid of g takes units c, c + g, c + 2·g, ...: positions 2c, 2c + 1, 2(c + g), ...
  FS_HOST_DEVICE static int zig_first(int c) { return 2 * c; }
  FS_HOST_DEVICE static int zig_next(int z, int g) { return (z & 1) != 0 ? z + 2 * g - 1 : z + 1; }
  // The walk's claim at position z (the CTA's own, end = zig_items()): its grid order item, z moved
  // past a padding position (a unit's second) to the CTA's next unit; -1 past the end.
  FS_HOST_DEVICE int zig_claim(int& z, int g, int end) const {
    for (;; z = zig_next(z, g)) {
      if (z >= end) return -1;
      const int w = zig_index(z);
      if (w >= 0) return w;
    }
  }
};

// The pairs a section of the work order holds (WsWorkOrder::section; prefill_cuda.cu's ws_section
// gives the call's numbers). Without a causal mask every q tile of a pair costs the same, so a
// section is one pair: its q tiles run side by side and read each K/V tile from HBM about once
// (16×1k at d 128 with 64-pair sections, the K/V of 32 MB of pairs at a time: L2 hit rate 48%,
// DRAM 1.75 TB/s, 394 TFLOP/s). Causal (or `by_budget`): as many pairs as have their K and V,
// 16-bit, `keys` a sequence and a kv head shared by `group` query heads, in `budget` bytes
// (kWsSectionBytes), at least one, so the longest q tiles of all pairs of a section go first.
// 8 MB since prefill v4.36 (32 MB, FA3's, before: with Q and O streaming beside them the
// sections' K/V were read from HBM 1.5-2x; session 50, 8 passes on an H100: 8 MB 0.0..+5.3% on
// every causal row, none down).
inline constexpr int64_t kWsSectionBytes = int64_t{8} << 20;
inline int ws_section_pairs(int64_t pairs, int64_t keys, int head_dim, int group, bool by_budget, int64_t budget) {
  if (!by_budget) return 1;
  const int64_t g = group < 1 ? 1 : group;
  int64_t bytes = keys * head_dim * 2 * 2 / g;
  if (bytes < 1) bytes = 1;
  const int64_t n = budget / bytes;
  return static_cast<int>(n < 1 ? 1 : (n > pairs ? pairs : n));
}

// x / d and x % d for 0 <= x < 2^31 and 1 <= d < 2^31 by a multiply-high and a shift (the
// round-up method of Granlund and Montgomery: m = floor(2^32 (2^s - d) / d) + 1 with s = ceil(log2
// d), q = (mulhi(x, m) + x) >> s, exact over that range), where d is fixed for many x: a run-time
// integer division is ~20 dependent instructions (I2F, MUFU.RCP, F2I and fix-ups), this three.
struct WsFastDiv {
  uint32_t d = 1, m = 1, s = 0;
  WsFastDiv() = default;
  FS_HOST_DEVICE explicit WsFastDiv(int div) : d(static_cast<uint32_t>(div)) {
    while ((uint32_t{1} << s) < d) ++s;
    m = static_cast<uint32_t>((uint64_t{1} << 32) * ((uint64_t{1} << s) - d) / d + 1);
  }
  FS_HOST_DEVICE int div(int x) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(static_cast<uint32_t>(x), m);
#else
    const uint32_t hi = static_cast<uint32_t>((static_cast<uint64_t>(static_cast<uint32_t>(x)) * m) >> 32);
#endif
    return static_cast<int>((hi + static_cast<uint32_t>(x)) >> s);
  }
  FS_HOST_DEVICE int mod(int x, int q) const { return x - q * static_cast<int>(d); }  // q = div(x)
};

// WsWorkOrder::item by WsFastDiv (FLASHSERVE_PREFILL_WS_FAST_DIV): the same items; the divisors
// (a section's items, a full section's pairs, the last section's, the heads) made once.
struct WsWorkOrderFast {
  WsWorkOrder order;
  WsFastDiv per_section, full, last, heads;
  WsWorkOrderFast() = default;
  FS_HOST_DEVICE WsWorkOrderFast(const WsWorkOrder& o, int num_heads)
      : order(o), per_section(o.section * o.num_m), full(o.section),
        last(ws_min(o.section, o.pairs - (o.pairs - 1) / o.section * o.section)), heads(num_heads) {}
  // Item w's q tile, pair, and the pair's head and sequence (pair = b · heads + h).
  FS_HOST_DEVICE void item(int w, int& m_tile, int& pair, int& h, int& b) const {
    const int sec = per_section.div(w), first = sec * order.section;
    const int within = per_section.mod(w, sec);
    const WsFastDiv& n = order.pairs - first < order.section ? last : full;  // the last section may be short
    const int q = n.div(within);
    m_tile = order.num_m - 1 - q;
    pair = first + n.mod(within, q);
    b = heads.div(pair);
    h = heads.mod(pair, b);
  }
};

// A varlen batch's order (q lengths not all alike; the kernel's persistent walks take it): only the
// q tiles that exist, w = 0, 1, ... < tiles[batch] · heads, mapped by a prefix sum over the
// sequences' tiles. Sequence by sequence in batch order, each in sections of min(section, heads)
// of its query heads, q tiles longest first in a section, the section's heads fastest; or, with
// `zig` (the static walk over causal rows, session 55), a section's positions in ws_zig_rank's
// units of a long and a short q tile of one head, without padding: after a section of odd items
// every unit up to the next such section is shifted by one position (one head's i-th shortest
// tile beside the next head's i-th longest, or a middle tile beside a neighbour: the unit's two
// q tile indices add up to m - 1 or m - 2, an aligned unit's to m - 1), and one unit a boundary
// spans two sections. The grid
// order holds items past a shorter sequence's queries, which a walk claims and skips one by
// one: one 8k sequence among 63 of 256 tokens, 32 heads of 128, is 131072 items of which 6080
// exist. A sequence's item w maps by a binary search over tiles (log2(batch) steps).
struct WsVarlenOrder {
  const int* tiles;  // [batch + 1]: q tiles of the sequences before b (ws_q_tiles), tiles[batch] the sum
  int batch, heads, section;
  FS_HOST_DEVICE void item(int w, int& m_tile, int& pair, bool zig = false) const {
    const int u = w / heads;  // tiles[b] <= u < tiles[b + 1]: the largest such b of [0, batch)
    int lo = 0, hi = batch;
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (tiles[mid] <= u) {
        lo = mid;
      } else {
        hi = mid;
      }
    }
    const int m_b = tiles[lo + 1] - tiles[lo];
    const int local = w - tiles[lo] * heads;
    const int g = ws_min(section, heads), per_section = g * m_b;
    const int sec = local / per_section, within = local - sec * per_section;
    const int n = ws_min(g, heads - sec * g);  // the last section may be short
    if (zig) {
      int rank, p;
      ws_zig_rank(within, n, m_b, rank, p);
      m_tile = m_b - 1 - rank;
      pair = lo * heads + sec * g + p;
      return;
    }
    m_tile = m_b - 1 - within / n;
    pair = lo * heads + sec * g + within % n;
  }
};

}  // namespace flashserve::cuda
