// The warp-specialized Hopper prefill kernel (sm_90a), FlashAttention-3's design: one producer
// warpgroup loads, one to three consumer warpgroups compute. Same semantics as
// prefill_sm90_kernel.cuh and prefill_kernel.cuh; templated on head_dim, the tile (query rows ×
// keys) and the storage type, one instance per file (prefill_sm90_ws_hd*_*.cu).
//
// Work item = (sequence, query head, tile of kBlockM query rows); a CTA takes one item, or on a
// persistent grid walks items (the dynamic walk, item by item claimed by an atomic add, or where
// the host has no counters for it the static walk; see the kernel's walk comment). One instance
// for packed K/V and one for pages (WsKv; at d 64 and 128 a third for pages of 128 tokens or
// more), and at d 64 and 128 one without the logit transform's code and one with it
// (prefill_ws_split_logits). 128 threads a warpgroup:
//  - warpgroup 0, the producer (setmaxnreg 24, 32 beside three consumer warpgroups, over FP8 pages
//    56 or, on the register path, 88: PrefillWsTraits::kProducerRegs): Q once and K/V tiles of
//    kBlockN keys into a ring of kStages stages, K and V with barriers of their own
//    (sm90_pipeline.cuh), issued in the order the consumers need them: K(0), then K(t), V(t-1),
//    ..., V(last). Packed K/V and Q come by TMA (one elected thread; a box of 64 columns × 1 head ×
//    rows a 128-byte swizzled column block, the layout wgmma.cuh describes). Paged K/V by the row
//    gather of all 128 producer threads (WsRowGather: 8 threads a key row, the rows' pool offsets
//    staged in shared memory a tile ahead, zero-filled past the keys and on page ids outside the
//    pool: a page's free slots may hold anything, NaN too), each thread arriving on the stage's
//    barrier when its cp.async copies land; the page ids of tile t + 2 are read while tile t's
//    copies are issued and tile t + 1's offsets staged, and a tile's offsets serve its K and its V.
//    The WsKv::kPageBoxes instances (16-bit pages of 128 tokens or more, 128-key tiles): whole
//    tiles by TMA page boxes, the row gather for a sequence's last partial tile.
//  - warpgroups 1 .. kConsumers, the consumers (setmaxnreg 240, or 160 with three, 232 alone:
//    d 64's 64-row tile, two CTAs an SM, kWsPair), 64 query rows each: per tile S = Q·Kᵀ (wgmma
//    m64nNk16 with N = kBlockN, both operands in shared memory), online softmax on the accumulators (online_softmax.cuh), O += P·V (P from
//    registers, V MN-major). Inside a
//    warpgroup, S(t) is issued before P(t-1)·V(t-1), so the softmax of t runs while the
//    tensor cores do P(t-1)·V(t-1); between the warpgroups named barriers pass their wgmma issue
//    round the ring ("ping-pong"), so one's softmax runs under the others' GEMMs (a lone
//    consumer warpgroup has none: there the SM's other CTA fills the gaps). In d 128's
//    packed 128-key instances a warpgroup that sees none of an item's last tile past its first
//    64 keys runs that tile at 64 keys (the half tile, FLASHSERVE_PREFILL_WS_HALF_DIAG).
// The O tile is normalised in registers and stored by TMA from a buffer in shared memory where
// the instance has room for one (PrefillWsTraits::kTmaO) and a warpgroup's 64 rows are all the
// sequence's, else from registers 16 bytes a thread (quad_transpose).
// bench/history/prefill.md, "prefill v4.0" to "prefill v4.9", has the floors, predictions and
// measurements.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <type_traits>

#include "attention/cuda/fp8_convert.cuh"
#include "attention/cuda/prefill_common.cuh"
#include "attention/cuda/prefill_cuda.h"
#include "attention/cuda/prefill_work_order.h"
#include "attention/cuda/sm90_pipeline.cuh"
#include "attention/cuda/wgmma.cuh"
#include "attention/params.h"

namespace flashserve::cuda {

// The TMA descriptors of a call (built on the host per call, prefill_cuda.cu), 128-byte swizzle:
// Q always, [rows, heads, head_dim] in boxes of 64 columns × 1 head × kBlockM rows; packed K and
// V alike (kBlockN rows; paged calls leave them unset, but for the page boxes' pool maps:
// page_boxes below).
struct PrefillTmaMaps {  // CUtensorMap is 64-byte aligned
  CUtensorMap q, k, v;
  // O, [rows, heads, head_dim] in boxes of 64 columns × 1 head × 64 rows (a consumer
  // warpgroup's), where o_tma: the instances with an O buffer (PrefillWsTraits::kTmaO) store
  // their whole 64-row blocks through it.
  CUtensorMap o;
  int o_tma = 0;
  // 2: Q's second slot in O's buffer where the instance has it (kTmaO, prefill v4.18); 1: one Q
  // slot and O's buffer apart (v4.17's walk, for A/B).
  int q_slots = 2;
  int section = 1;  // (query head, sequence) pairs a section of the work order (WsWorkOrder)
  int plain = 1;    // 1: the plain tile run (v4.20; the instances without the transform's code); 0: none
  int varlen = 0;  // 1: q lengths differ; a persistent grid walks the tiles that exist (WsVarlenOrder)
  // 1: k and v are the page pool's maps, [blocks, kv heads, block_size, head_dim] in boxes of 64
  // columns x 128 rows (the WsKv::kPageBoxes instances, which take whole tiles by them).
  int page_boxes = 0;
  // FP8 pages, bench-only diagnosis of the producer's pace (the outputs are wrong): 1 skips the
  // conversion into the fp16 stages, 2 the copies of the codes (the copy path only), 3 converts
  // e4m3 codes by e5m2's byte placement (the same shared-memory traffic, no F2FP); 0 (always
  // outside a bench): none.
  int fp8_diag = 0;
  // The dynamic scheduler's two counters (packed or paged K/V on a persistent grid; null: the static walk):
  // [0] items claimed past the grid's first, [1] CTAs done; the last CTA done zeroes both.
  unsigned* sched = nullptr;
  // Bench-only stamps (WsTrace): null outside a -DFLASHSERVE_PREFILL_TRACE=ON build's traced call.
  unsigned long long* trace = nullptr;
  int trace_ctas = 0;  // CTAs with a record (blockIdx.x below it)
  // The loads' L2 policies (prefill v4.36): bit 0 K and V evict_last (the CTAs of a section read
  // them again and again), bit 1 Q evict_first (read once); 0: evict_normal, as without a hint.
  // The host's default (make_tma_maps) says which it sets and why.
  // Last in the struct, so that objects built before it read the fields above where they were.
  int l2_hints = 2;
  // 1: causal rows; a static walk (a persistent grid without counters) then goes by units of a
  // long and a short q tile of a pair: WsVarlenOrder's zigzag where the q lengths differ and the
  // walk takes that order (session 55), else WsWorkOrder's zigzag order (session 54; over the
  // grid order's items, those past a shorter sequence's queries skipped as before; prefill_cuda.cu);
  // 0: the round robin over the grid order or WsVarlenOrder (prefill v4.40; the host's rule in
  // prefill_cuda, prefill_cuda.cu).
  int zigzag = 0;
};

// Bench-only per-CTA stamps (a build configured with -DFLASHSERVE_PREFILL_TRACE=ON, which
// defines FLASHSERVE_PREFILL_TRACE for flashserve_core alone; bench/trace_prefill.py reads them):
// a record of kWords words a CTA, a header (0 SM id, 1 global timer at entry, 2 clock at entry,
// 3 clock after the barrier init, 4 clock at the first consumer warpgroup's exit, 5 global timer
// there, 6 its items) and kEvents words for each of its first kItems items: consumer warpgroup c
// stamps clock64 at 8·c + (0 item start, 1 Q landed, 2 K(0) landed, 3 its first issue slot, 4
// the first tile's softmax done, 5 the main loop done, 6 the last P·V retired, 7 O stored);
// warpgroup 0 of the consumers also writes 24 the item w, 25 its key tiles, 27 the clock at its
// plain run's end (tiles [plain_lo, plain_hi), where the loop gets there) and 31 plain_lo |
// plain_hi << 16 | the loop's end tile << 32 (the masked tiles after the run); the producer 28 item
// start, 29 Q issued (its stage acquired), 30 the item w, 26 the item's last load issued. The
// item boundary in finer steps (two consumer warpgroups only: with three, the third's stamps
// take words 16-23), consumer warpgroup c at 16 + 4·c + (0 the dynamic walk's wait
// for the item's slot returned, 1 the store's first barrier passed, 2 O written to its buffer,
// 3 the buffer fenced and the second barrier passed). In every other build the stamps are no
// code and the fields above stay null.
struct WsTrace {
  static constexpr int kHeader = 8, kItems = 32, kEvents = 32, kWords = kHeader + kItems * kEvents;
#ifdef FLASHSERVE_PREFILL_TRACE
  unsigned long long* rec = nullptr;
  __device__ explicit WsTrace(const PrefillTmaMaps& m)
      : rec(m.trace != nullptr && static_cast<int>(blockIdx.x) < m.trace_ctas ? m.trace + blockIdx.x * kWords : nullptr) {}
  __device__ __forceinline__ static unsigned long long now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  __device__ __forceinline__ void entry() const {  // words 0-2
    if (rec == nullptr) return;
    unsigned smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    rec[0] = smid;
    rec[1] = now();
    rec[2] = clock64();
  }
  __device__ __forceinline__ void after_init() const {
    if (rec != nullptr) rec[3] = clock64();
  }
  __device__ __forceinline__ void exit(int items) const {  // words 4-6
    if (rec == nullptr) return;
    rec[4] = clock64();
    rec[5] = now();
    rec[6] = items;
  }
  __device__ __forceinline__ void stamp(int item, int event) const {
    if (rec != nullptr && item < kItems) rec[kHeader + item * kEvents + event] = clock64();
  }
  __device__ __forceinline__ void value(int item, int event, long long v) const {
    if (rec != nullptr && item < kItems) rec[kHeader + item * kEvents + event] = v;
  }
#else
  __device__ explicit WsTrace(const PrefillTmaMaps&) {}
  __device__ __forceinline__ void entry() const {}
  __device__ __forceinline__ void after_init() const {}
  __device__ __forceinline__ void exit(int) const {}
  __device__ __forceinline__ void stamp(int, int) const {}
  __device__ __forceinline__ void value(int, int, long long) const {}
#endif
};

template <int kHeadDim, int kBlockN>
struct WsRowGather;  // below

// Tile sizes of the warp-specialized kernel (one place; FA3's tile_size.h), by head dim, the
// tile's form (the head dim's first, its second, `alt`, or d 64's third, kWsPair below:
// ws_tile_form in prefill_cuda.cu says when) and whether K/V are paged (the ring's depth at d 128,
// below):
//  - d 256: 128 × 80, Q 64 KB + 2 stages × (K 40 + V 40) KB = 224 KB (the O accumulator is 128
//    registers a thread, so the S tile stays narrow);
//  - d 128: 128 × 128, packed 32 + 3 × (32 + 32) = 224 KB, pages 32 + 2 × (32 + 32) = 160 KB
//    (the ring's depth below); alt, the wide key tile, 128 × 176, 32 + 2 × (44 + 44) = 208 KB;
//  - d 64: 192 × 128 (three consumer warpgroups, FA3's shape: a K/V tile serves 192 rows),
//    24 + 2 × (16 + 16) = 88 KB; alt 128 × 128 (two), for causal calls of short sequences, whose
//    192-row items compute more masked scores (16x1k: 67% of the scores a 192-row item computes
//    are in the causal triangle, 89% of a 128-row one's), and for non-causal calls of no more
//    than 1024 queries a sequence (192-row tiles pad them more: 1k to 1152 rows, 512 to 576).
//    Same-run A/B, 192 rows against 128 (bench/history/prefill.md "Session 39", call 2, H100,
//    v4.27, 6 passes): 1×16k 483/445 causal against 422/413, 4×4k 440/356 against 402/368, 16×1k
//    354/194 against 358/260, the skewed batch causal 319 against 328, 4×4k causal in 16-token
//    pages 335 against 354; non-causal ("Session 45", call 3, H100, 6 passes, paired medians,
//    128 rows against 192): 16x1k +4.4%, in 16-token pages +2.6%, 32x512 +10.2%, 64x300 +0.6%,
//    8x2k -5.9%, the skewed batch -5.2% (call 2: 4x4k -7.7%, 1x16k -10.5%). kWsPair, 64 × 128
//    (one consumer warpgroup, two CTAs an SM), 8 + 8 (Q's second slot, O's buffer) + 2 × (16 +
//    16) = 80 KB a CTA, for the short rows' packed calls where 128 rows were the tile before.
struct PrefillWsTiles {
  int block_m, block_n, stages;
};
// The forms of a head dim's tile (prefill_ws_tiles' form): its first, its second (d 128's wide key
// tile, d 64's 128 rows), and d 64's third, 64 rows × 128 keys with one consumer warpgroup, two
// CTAs an SM (PrefillWsTraits::kCtasPerSm): one CTA's item boundary (its Q wait, first S and
// softmax, O store) runs beside the other's tiles, without the ping-pong (the SM's warp schedulers
// interleave the two CTAs' GEMMs), at twice the K/V bytes a FLOP of the 128-row tile (the L2's
// bytes into shared memory: 16x1k causal 1.2 GB, 153 us at session 50's 7.84 TB/s, 1x16k causal
// 17 GB, 2.2 ms, against 2.36 ms of FLOPs at 466 TFLOP/s). Same-run A/B, 64 rows against the
// default rule's 128 or 192 (bench/history/prefill.md "Session 51", call 2, H100, 6 passes,
// paired medians): where 128 rows were the tile, 16x1k causal +2.1% (6/6), 4x4k causal +2.6%
// (4/6), the skewed batch causal +3.1%, 16x1k +4.3%, 32x512 +3.3%, 64x300 +23.0% (6/6; 5 row
// tiles of 64 against 3 of 128), but in 16-token pages (the row gather's copies twice a FLOP)
// 16x1k causal -5.1%, 4x4k causal -8.3%; where 192 rows were, 1x16k causal -8.9%, 1x16k -14.1%,
// 4x4k -7.1%, 8x2k -6.2%, the skewed batch -8.3% (the L2's bytes).
enum : int { kWsFirst = 0, kWsSecond = 1, kWsPair = 2 };
// The next item's view made under the drain's last P·V (bench-only, 0; the dynamic walk only):
// the producer hands each item over a second time, as one 64-bit word (its count in the walk,
// then the item) in a slot of its own beside the Q stage's, written when it takes the item's Q
// stage, before Q's load is issued, so not gated by Q's landing; the consumers read the next
// item's word after issuing this item's last P·V and make its view (item(): the work order's and
// the sequence's arithmetic, ~0.4 us an item on the trace at d 128) while that P·V runs, so the
// next item starts at its Q wait. FA3 hands its consumers the next tile apart from Q too
// (session 47, not measured yet).
#ifndef FLASHSERVE_PREFILL_WS_ITEM_AHEAD
#define FLASHSERVE_PREFILL_WS_ITEM_AHEAD 0
#endif
// A tile loop without the overlap inside a warpgroup (bench-only, 0; every instance of two
// consumer warpgroups, 16-bit, without the half tile): every tile of an item S(t), its wait, the softmax, P(t)·V(t) and its wait,
// one loop from the first tile to the last, none peeled out of it; the ping-pong's window (the
// named barriers) around the softmax, so one warpgroup's exps run under the other's GEMMs. cuDNN's
// d 64 short-row kernel runs that way (ncu's SASS, bench/history/prefill.md "Session 57": 348
// instructions an item and 499 a tile against our 64-row tile's 1558 and 440 at 4.5 tiles an item,
// 0.352 against 0.401 ms at d 64 16x1k causal), its mask a branch on the diagonal tile. A/B
// (bench/results/session57/prep1.sh's variants): d 64's 128-row tile (FLASHSERVE_PREFILL_WS_BLOCK_M=128
// chooses it) against the overlapped loop and the default's 64-row tile; d 128's tiles with
// FLASHSERVE_PREFILL_WS_HALF_DIAG=0 against the overlapped loop built alike.
// ptxas moves register work across a named barrier (session 58, the SASS of session 57's build:
// 13 of a tile's 66 MUFU above BAR.SYNC, 51 below BAR.ARV, 2 between), but not shared
// memory accesses: so the window is pinned by a shared load of 0.f after BAR.SYNC, added to one
// logit of each row (the rows' max, and so every exp, waits for it), and a shared store of the
// rows' sums before BAR.ARV (it waits for every exp). Two words of their own (kRestBytes + 8).
#ifndef FLASHSERVE_PREFILL_WS_SERIAL
#define FLASHSERVE_PREFILL_WS_SERIAL 0
#endif
// The ring's depth (stages) of d 128's 128 × 128 tile: three for packed K/V (Q 32 KB + 3 × 64
// KB = 224 KB, one Q slot and no O buffer, so O is stored from registers), two for pages (with
// Q's second slot in the O buffer). Three against two, same run (bench/history/prefill.md
// "Session 40", call 1, H100, 8 passes, paired medians): packed 16x1k +3.8%, causal +1.0%, 4x4k
// causal +5.0%, 8x2k causal +1.9%, the skewed batch causal +3.0%; pages level (4x4k causal in
// 16-token pages -0.1%). FLASHSERVE_PREFILL_WS_STAGES_128 (bench-only) sets the packed depth
// (2 for A/B); the FP8 instances take the pages' depth (no room for a third stage beside the
// codes' slots). FLASHSERVE_PREFILL_WS_STAGES_64 (bench-only, 2): d 64's depth at both tiles,
// packed and pages.
#ifndef FLASHSERVE_PREFILL_WS_STAGES_128
#define FLASHSERVE_PREFILL_WS_STAGES_128 3
#endif
#ifndef FLASHSERVE_PREFILL_WS_STAGES_64
#define FLASHSERVE_PREFILL_WS_STAGES_64 2
#endif
// The tile of a call by its head dim, its form (above; kWsPair at d 64 only) and whether K/V are
// paged (block_m and block_n do not depend on it). {0, 0, 0}: no such tile.
constexpr PrefillWsTiles prefill_ws_tiles(int head_dim, int form, bool paged) {
  if (form == kWsPair && head_dim != 64) return PrefillWsTiles{0, 0, 0};
  const bool alt = form != kWsFirst;
  return head_dim == 64 && form == kWsPair ? PrefillWsTiles{64, 128, FLASHSERVE_PREFILL_WS_STAGES_64}
         : head_dim == 256              ? PrefillWsTiles{128, 80, 2}
         : head_dim == 128 && alt       ? PrefillWsTiles{128, 176, 2}
         : head_dim == 128              ? PrefillWsTiles{128, 128, paged ? 2 : FLASHSERVE_PREFILL_WS_STAGES_128}
         : head_dim == 64 && !alt       ? PrefillWsTiles{192, 128, FLASHSERVE_PREFILL_WS_STAGES_64}
                                        : PrefillWsTiles{128, 128, FLASHSERVE_PREFILL_WS_STAGES_64};
}
// Head dims whose warp-specialized instances come in two forms by the logits' code (prefill
// v4.27, session 39): a call without a transform (logit_transform: softcap, ALiBi, a scale <= 0)
// takes an instance without the transform's code (kTransform false: the plain run, tiles without
// a mask, and a masked loop with the mask only), a call with one the instance with it (the
// `_transform` instance files: one loop, every tile general). Elsewhere (d 256, FP8 pages) one
// instance with the transform's code takes both. Against one instance for both (session 39 call
// 1, H100, 6 passes, paired medians): d 64 (which had the plain run beside the transform's code:
// 8928 instructions, 107 local loads; split, 5112 and 59) +1-4% on every row by ws, d 128 (no
// plain run before: the plain run beside the transform's code cost the long rows 2-5% in session
// 32) +1..+6.5% (1x16k +5.9%, causal +6.5%, 4x4k +5.6%; bench/history/prefill.md "Session 39").
constexpr bool prefill_ws_split_logits(int head_dim) { return head_dim == 64 || head_dim == 128; }
// kFp8: FP8 pages (issue 25; T = __half, the MMAs' and the stages' type, the call's q and o bf16 or
// fp16 at run time), d 128 and 128-key tiles only: the row gather copies the codes into a slot of
// their own (K and V, kFp8StageBytes), each producer thread converts the chunks it copied into the
// fp16 stage (kFp8Reg, the register path below: it loads them into registers instead and converts
// from there; the slots stay allocated, unused), and the consumers convert their Q rows into fp16
// by a power of two.
// The copy path's producer registers: 56, the consumers 224 (session 31; their SASS as at 232
// and 240: the same 12207 instructions, 5 local loads and 2 stores), where the kernel's local
// accesses fell from 61 loads and 48 stores at 40 (producer v4, session 29; at 24 the producer
// spilled twice as much as at 40, 85 local loads) to 29 and 19.
// -DFLASHSERVE_PREFILL_WS_FP8_REGS=24 or 40 for A/B.
#ifndef FLASHSERVE_PREFILL_WS_FP8_REGS
#define FLASHSERVE_PREFILL_WS_FP8_REGS 56
#endif
inline constexpr int kFp8ProducerRegs = FLASHSERVE_PREFILL_WS_FP8_REGS;
// FP8 producer v5, the register path (WsKv::kFp8RegPages; session 33, measured in session 34):
// the codes loaded into registers and converted from there (WsRowGather::ldg16_or_zero,
// WsFp8Dst), without the code slots' shared round trip (cp.async writes 1 byte a code, the
// conversion reads it back: 2 of the 4 shared bytes a code the producer moves). A tile of codes
// is 32 registers: the producer 88 (consumers 208, their tile loop without local memory; the
// producer's loop 8 local loads a tile; 96 ran slower). e5m2 pools take it (+10-11%: its
// conversion is two PRMT a word); on e4m3 it ran level or worse (F2FP's conversions set its pace
// there; bench/history/prefill.md "Session 34"), so e4m3 pools keep the copy path.
#ifndef FLASHSERVE_PREFILL_WS_FP8_REG_REGS
#define FLASHSERVE_PREFILL_WS_FP8_REG_REGS 88
#endif
inline constexpr int kFp8RegProducerRegs = FLASHSERVE_PREFILL_WS_FP8_REG_REGS;
// The 16-bit producer's registers beside one or two consumer warpgroups (24; bench-only for A/B,
// e.g. 40 for the paged instances, whose row gather spills at 24: d 128, 49 local loads and 43
// stores).
#ifndef FLASHSERVE_PREFILL_WS_PRODUCER_REGS
#define FLASHSERVE_PREFILL_WS_PRODUCER_REGS 24
#endif
template <int kHeadDim, int kRows, int kKeyTile, typename T, bool kPaged, bool kFp8 = false, bool kFp8Reg = false>
struct PrefillWsTraits {
  static_assert(kHeadDim == 64 || kHeadDim == 128 || kHeadDim == 256, "prefill ws: head_dim 64, 128 or 256");
  static_assert(sizeof(T) == 2, "16-bit storage");
  static_assert(!kFp8 || (std::is_same_v<T, __half> && kHeadDim == 128 && kRows == 128 && kKeyTile == 128),
                "FP8 pages: fp16 MMAs, d 128, 128 x 128 tiles");
  static_assert(kPaged || !kFp8, "FP8 K/V come in pages");
  static constexpr PrefillWsTiles kFirst = prefill_ws_tiles(kHeadDim, kWsFirst, kPaged);
  static constexpr PrefillWsTiles kTiles = prefill_ws_tiles(
      kHeadDim, kRows == 64 ? kWsPair : kKeyTile != kFirst.block_n || kRows != kFirst.block_m ? kWsSecond : kWsFirst,
      kPaged);
  static constexpr int kBlockM = kTiles.block_m, kBlockN = kTiles.block_n, kStages = kTiles.stages;
  static_assert(kBlockM == kRows && kBlockN == kKeyTile, "a tile of prefill_ws_tiles");
  static constexpr int kConsumers = kBlockM / 64;  // warpgroups of 64 query rows
  static_assert(kBlockM % 64 == 0 && kConsumers <= 3 && kBlockN % 16 == 0 && kBlockN <= 256,
                "one to three consumer warpgroups of 64 rows; S tiles of whole k-steps, one TMA box");
  // One consumer warpgroup: two CTAs an SM (kWsPair), each with half the SM's registers and
  // shared memory (228 KB an SM, 1 KB of it each CTA's reserve: 113 KB a CTA, else 227).
  static constexpr int kCtasPerSm = kConsumers == 1 ? 2 : 1;
  static constexpr int kSmemLimit = kCtasPerSm == 1 ? 227 * 1024 : 113 * 1024;
  static constexpr int kThreads = 128 * (kConsumers + 1);
  // Two consumers: 24/240 (40/232: -4..-12% at d 128, bench/history/prefill.md, "prefill v4.2
  // experiments"); three: 32/160 (FA3's split); one (two CTAs an SM): 24/232.
  // FP8 pages: kFp8ProducerRegs (above) for the converting producer. The consumers take the
  // rest, in steps of 8 (setmaxnreg's), at most 240, of what the CTA got at launch
  // (__launch_bounds__(kThreads, kCtasPerSm): 65536 / (kThreads · kCtasPerSm) a thread in steps of
  // 8, 168 at 384 threads, 128 at 256 threads two CTAs an SM): setmaxnreg only moves registers
  // between the warpgroups, and an increase past that pool waits for registers that never come
  // (producer 32 with consumers 240 at d 128: 1024 over).
  static constexpr int kProducerRegs =
      kConsumers == 3 ? 32
                      : (kFp8 ? (kFp8Reg ? kFp8RegProducerRegs : kFp8ProducerRegs) : FLASHSERVE_PREFILL_WS_PRODUCER_REGS);
  static constexpr int kLaunchRegs = 65536 / (kThreads * kCtasPerSm) / 8 * 8;
  static constexpr int kConsumerRegs =
      std::min(240, (kThreads * kLaunchRegs / 128 - kProducerRegs) / kConsumers / 8 * 8);
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= kThreads * kLaunchRegs, "registers");
  static constexpr int kChunks = kHeadDim / 8;   // 16-byte chunks a row
  static constexpr int kBlocks = kHeadDim / 64;  // 128-byte column blocks a row
  static constexpr int kKSteps = kHeadDim / 16;
  static constexpr int kKeySteps = kBlockN / 16;  // k-steps of P·V
  static constexpr int kQElems = kBlockM * kHeadDim;
  static constexpr int kTileElems = kBlockN * kHeadDim;
  static constexpr uint32_t kQBytes = kQElems * 2, kTileBytes = kTileElems * 2;
  // The row gather's two slots of staged row offsets (WsRowGather), after the barriers: pages
  // only (packed K/V come by TMA; their instances give the room to the cached sequences).
  static constexpr int kRowSlotBytes = kPaged ? WsRowGather<kHeadDim, kBlockN>::kSmemBytes : 0;
  // FP8: the codes of two K and two V tiles as the row gather lands them (slots by the tile's
  // parity: a tile's copy is issued two conversions before its own, session 27), and the
  // consumer warps' maxima of |q| (4 a warpgroup). 227 KB with the rest and 71 cached sequences
  // (kSeqCache; one slot a ring left room for 257): FP8 batches of more sequences read their
  // offsets from global memory.
  static constexpr int kFp8StageBytes = kFp8 ? 4 * kBlockN * kHeadDim : 0;
  static constexpr int kFp8ScratchBytes = kFp8 ? 16 * kConsumers : 0;
  // The O buffer (Q's size and layout: a consumer warpgroup's 64 rows a column block, 128-byte
  // swizzled) for the TMA store of O, where shared memory has room: d 128's pages at 128 × 128
  // (198 KB with it) and d 64 (192 rows 113 KB, 128 rows 97 KB); not d 128's packed 128 × 128
  // (three stages) nor its 176-key tile (208 KB of stages), d 256 (224 KB), FP8.
  // It is Q's second slot (prefill v4.18): a warpgroup writes its O into its own rows of the slot
  // its item's Q came in (dead after its last S), so the next item's Q loads into the other slot
  // during this item, not after its last S.
  // + 20: the dynamic walk's slots (the items the producer hands the consumers, one a Q slot; two
  // claims the producer threads share; the varlen walk's items).
  // (+ 20 more with FLASHSERVE_PREFILL_WS_ITEM_AHEAD: its two 64-bit slots, 8-byte aligned.)
  // (+ 8 with FLASHSERVE_PREFILL_WS_SERIAL: its window's two words.)
  static constexpr int kRestBytes = kFp8StageBytes + kFp8ScratchBytes + kRowSlotBytes + 20 +
                                    (FLASHSERVE_PREFILL_WS_ITEM_AHEAD != 0 ? 20 : 0) +
                                    (FLASHSERVE_PREFILL_WS_SERIAL != 0 ? 8 : 0) + 1024;
  static constexpr bool kTmaO =
      !kFp8 && (2 * kQElems + 2 * kStages * kTileElems) * 2 + (4 + 4 * kStages) * 8 + kRestBytes <= kSmemLimit;
  static constexpr int kOElems = kTmaO ? kQElems : 0;
  static constexpr int kQSlots = kTmaO ? 2 : 1;
  static constexpr int kBarriers = 2 * kQSlots + 4 * kStages;  // q full/empty, k full/empty, v full/empty
  static constexpr int kBaseSmemBytes = (kQElems + kOElems + 2 * kStages * kTileElems) * 2 + kBarriers * 8 + kRestBytes;
  static_assert(kBaseSmemBytes <= kSmemLimit, "shared memory");
  // The sequences' offsets cached in shared memory on a persistent grid (cu_seqlens_q and
  // cu_seqlens_k, or the pages' seq_lens, and a varlen batch's q tile prefix (WsVarlenOrder):
  // kSeqCache entries each, as many as fit up to 257: 257 at d 64 and d 128's 176-key and paged
  // instances, 159 at d 128's packed 128-key ones (three stages), 162 at d 256 packed and 74 in
  // pages, 71 FP8), so that an item's view is made without global loads (0.7 us an item on the
  // trace); a batch of more sequences reads them from global memory, and the varlen walk keeps
  // only its q tile prefix there (up to 3·kSeqCache - 1 sequences; more walk every q tile of the
  // grid order). 200 prompts of 64-511 tokens at d 128 run faster so on the 128-key tile than
  // cached on the 176-key one (bench/history/prefill.md "Session 40", call 13: +3.7% causal).
  static constexpr int kSeqCache = (kSmemLimit - kBaseSmemBytes) / 12 < 257 ? (kSmemLimit - kBaseSmemBytes) / 12 : 257;
  static constexpr int kSmemBytes = kBaseSmemBytes + 12 * kSeqCache;
  static_assert(kSeqCache >= 64, "the cached sequences' floor: a byte more of stages silently costs every item global loads");
};

// The paged row gather (every paged instance's path), FA3's PagedKVManager thread layout
// with its address work staged in shared memory. 8 threads a key row: thread tid copies chunk
// tid % 8 of each 128-byte column block of keys tid / 8 + 16·i (i < kPasses), so its rows share
// one swizzle phase (shared-memory offsets: one base plus immediates) and a row's column blocks
// are immediate offsets from one global address. The rows' offsets in the pool, in 16-byte units
// (32 bits: the host takes this path only for pools below 64 GiB), are made a tile ahead by the
// warp that copies them, one row a lane a half (lane l of warp w, half j: row 16·(l / 4 + 8·j) +
// 4·w + l % 4; a second half only where a tile has more than 8 passes, the 176-key tile), into a
// slot of shared memory laid out so that a thread's kPasses offsets are adjacent (16-byte loads),
// with a ballot of the valid rows a half (in range, page id in the pool; the others are
// zero-filled). Two slots: tile t's serve K(t) and V(t). A tile's page ids are read a tile before
// their offsets are staged, so no copy waits behind a table read. A pass then costs its share of
// a shared load, a bit test, one IMAD.WIDE and the copies, where the older gather (v4.4-v4.22)
// spent ~15 instructions a row on 16 rows a thread. kFits: tiles of whole passes, up to 16 of
// them (256 keys).
template <int kHeadDim, int kBlockN>
struct WsRowGather {
  static constexpr int kBlocks = kHeadDim / 64;  // 128-byte column blocks a row
  static constexpr int kPasses = kBlockN / 16;   // 16 rows a pass of the 128 threads
  static constexpr int kHalves = kPasses > 8 ? 2 : 1;  // rows a lane stages (8 passes a half)
  static constexpr int kPad = (kPasses + 3) / 4 * 4;  // offsets a thread's run in the slot
  static constexpr bool kFits = kBlockN % 16 == 0 && kPasses <= 16;
  // [16 rows of a pass][kPad] offsets, then the 4 warps' masks a half.
  static constexpr int kSlotBytes = 16 * kPad * 4 + 16 * kHalves;
  static constexpr int kSmemBytes = kFits ? 2 * kSlotBytes : 0;
  struct Ids {
    int32_t id[kHalves];  // -1: none
  };

  // This lane's pass and row of a tile in half j (a row where the pass is < kPasses).
  __device__ __forceinline__ static int staged_pass(unsigned tid, int j) { return static_cast<int>((tid % 32) / 4) + 8 * j; }
  __device__ __forceinline__ static int staged_row(unsigned tid, int j) {
    return 16 * staged_pass(tid, j) + static_cast<int>(4 * (tid / 32) + tid % 4);
  }
  // The page ids of this lane's rows of the tile at key0 (-1: none, past hi or a lane without a row).
  __device__ __forceinline__ static Ids read_ids(const KVSource& s, int key0, int hi, unsigned tid) {
    Ids ids;
#pragma unroll
    for (int j = 0; j < kHalves; ++j) {
      const int key = key0 + staged_row(tid, j);
      ids.id[j] = staged_pass(tid, j) < kPasses && key < hi ? s.table[key >> s.block_shift] : -1;
    }
    return ids;
  }
  __device__ __forceinline__ static Ids no_ids() {
    Ids ids;
#pragma unroll
    for (int j = 0; j < kHalves; ++j) ids.id[j] = -1;
    return ids;
  }
  // Stages the offsets of the tile at key0 from the ids read_ids gave; all 32 lanes of the warp.
  __device__ __forceinline__ static void stage(const KVSource& s, unsigned char* slot, const Ids& ids, int key0,
                                               unsigned tid) {
    const unsigned lane = tid % 32;
#pragma unroll
    for (int j = 0; j < kHalves; ++j) {
      const int32_t id = ids.id[j];
      const bool valid = static_cast<uint32_t>(id) < static_cast<uint32_t>(s.num_blocks);  // -1 too
      const uint32_t in_block = static_cast<uint32_t>((key0 + staged_row(tid, j)) & s.block_mask) * (s.token_bytes >> 4);
      const uint32_t off = valid ? static_cast<uint32_t>(id) * (s.block_bytes >> 4) + in_block : 0u;
      const uint32_t mask = __ballot_sync(0xffffffffu, valid);
      const int pass = staged_pass(tid, j);
      if (pass < kPasses) reinterpret_cast<uint32_t*>(slot)[(4 * (tid / 32) + lane % 4) * kPad + pass] = off;
      if (lane == 0) reinterpret_cast<uint32_t*>(slot + 16 * kPad * 4)[4 * j + tid / 32] = mask;
    }
  }
  // This thread's chunk of the kv head's K or V base (block 0, token 0), for copy: behind a
  // volatile move, else the compiler splits the sum between the K and V copies and each pass
  // pays two more adds.
  __device__ __forceinline__ static const char* thread_base(const char* base, unsigned tid) {
    uint64_t g = reinterpret_cast<uint64_t>(base + (tid % 8) * 16);
    asm volatile("mov.b64 %0, %0;\n" : "+l"(g));
    return reinterpret_cast<const char*>(g);
  }
  // cp.async of 16 bytes, zeros where (bits & bit) == 0 (ignore-src: one predicate from one LOP3).
  __device__ __forceinline__ static void copy16(uint32_t dst, const char* src, uint32_t bits, uint32_t bit) {
    asm volatile(
        "{\n.reg .pred z;\n.reg .b32 t;\nand.b32 t, %2, %3;\nsetp.eq.u32 z, t, 0;\n"
#if FLASHSERVE_PREFILL_WS_GATHER_DIAG == 4
        "cp.async.ca.shared.global [%0], [%1], 4, z;\n}\n" ::"r"(dst),
#else
        "cp.async.cg.shared.global [%0], [%1], 16, z;\n}\n" ::"r"(dst),
#endif
        "l"(src), "r"(bits), "r"(bit)
        : "memory");
  }
  // One K or V tile from a staged slot; g0: thread_base of the kv head's K or V.
  template <typename T>
  __device__ __forceinline__ static void copy(const unsigned char* slot, const char* g0, T* dst, unsigned tid) {
    const unsigned row0 = tid / 8, chunk = tid % 8;  // row0 = 4·warp + lane / 8
    const uint32_t* offs = reinterpret_cast<const uint32_t*>(slot) + row0 * kPad;
    // Bit 4·(i % 8) of valid[i / 8]: row row0 + 16·i (the warp's lane 4·(i % 8) + lane / 8 staged it).
    uint32_t valid[kHalves];
#pragma unroll
    for (int j = 0; j < kHalves; ++j)
      valid[j] = reinterpret_cast<const uint32_t*>(slot + 16 * kPad * 4)[4 * j + tid / 32] >> ((tid % 32) / 8);
    const uint32_t d0 = smem_u32(dst + row0 * 64 + ((chunk ^ (row0 & 7)) << 3));
#pragma unroll
    for (int q = 0; q < kPad / 4; ++q) {
      const uint4 o = reinterpret_cast<const uint4*>(offs)[q];
      const uint32_t ow[4] = {o.x, o.y, o.z, o.w};
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 4 * q + e;
        if (i >= kPasses) break;
        const char* g = g0 + static_cast<uint64_t>(ow[e]) * 16;  // one IMAD.WIDE.U32
#pragma unroll
        for (int c = 0; c < kBlocks; ++c)
          copy16(d0 + (c * kBlockN * 64 + i * 16 * 64) * 2, g + c * 128, valid[i / 8], 1u << (4 * (i % 8)));
      }
    }
  }
  // copy's 16 bytes into registers instead (the FP8 producer's register path), from global memory
  // by the read-only path (volatile: issued where written, ahead of the conversions that wait
  // for them), or zeros where bit is 0.
  __device__ __forceinline__ static uint4 ldg16_or_zero(const char* src, uint32_t bit) {
    uint4 v;
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.u32 p, %5, 0;\nmov.u32 %0, 0;\nmov.u32 %1, 0;\nmov.u32 %2, 0;\nmov.u32 %3, 0;\n"
        "@p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n}\n"
        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
        : "l"(src), "r"(bit));
    return v;
  }
};

// A 4×4 transpose of 32-bit words over the quad of lanes 4·(lane / 4) .. + 3 (tig: lane % 4):
// lane tig holds M[tig][0..3] in w and leaves with M[0..3][tig], by two xor shuffles a word pair.
__device__ __forceinline__ void quad_transpose(uint32_t (&w)[4], int tig) {
  const bool hi = (tig & 2) != 0, lo = (tig & 1) != 0;
  // Lanes tig, tig ^ 2: each keeps columns 2·hi, 2·hi + 1 of its row and takes them of the other's.
  const uint32_t k0 = hi ? w[2] : w[0], k1 = hi ? w[3] : w[1];
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, hi ? w[0] : w[2], 2);
  const uint32_t r1 = __shfl_xor_sync(0xffffffffu, hi ? w[1] : w[3], 2);
  // Lanes tig, tig ^ 1: each keeps column tig of rows tig, tig ^ 2 and takes it of rows tig ^ 1, tig ^ 3.
  const uint32_t ka = lo ? k1 : k0, kb = lo ? r1 : r0;
  const uint32_t ra = __shfl_xor_sync(0xffffffffu, lo ? k0 : k1, 1);
  const uint32_t rb = __shfl_xor_sync(0xffffffffu, lo ? r0 : r1, 1);
  // In row order: rows 2·hi, 2·hi + 1 are (ka, ra) or (ra, ka); rows 2·(1 - hi) + 0, 1 likewise (kb, rb).
  const uint32_t a0 = lo ? ra : ka, a1 = lo ? ka : ra, b0 = lo ? rb : kb, b1 = lo ? kb : rb;
  w[0] = hi ? b0 : a0;
  w[1] = hi ? b1 : a1;
  w[2] = hi ? a0 : b0;
  w[3] = hi ? a1 : b1;
}

// FP8 pages: the codes this producer thread copied into an FP8 slot (WsRowGather<64, kBN>'s
// layout: 128-byte rows, chunk c of row r at r·128 + (c ^ r % 8)·16; thread tid: chunk tid % 8 of
// rows tid / 8 + 16·i), converted into the fp16 stage (the swizzled layout of d 128: dims 16·c ..
// + 15 are chunks 2·(c % 4) and + 1 of column block c / 4). Every FP8 code is an fp16 value.
// The 8 threads of a store phase are one row's 8 chunks: threads c and c + 4 would store to the
// same banks (column blocks 16 KB apart, chunks 2·(c % 4) ^ r % 8 alike), so threads c >= 4 store
// their odd chunk first: each store then covers a row's 8 chunk columns, 32 banks, no conflict.
// Where thread tid's converted chunks go: its rows' base in the stage, the two 8-element chunks'
// offsets, and whether it stores its odd chunk first.
struct WsFp8Dst {
  __half* d;
  unsigned o0, o1;
  bool odd_first;
  __device__ __forceinline__ WsFp8Dst(__half* dst, int kBN, unsigned tid) : WsFp8Dst(dst, kBN, tid / 8, tid % 8, true) {}
  // Row row0 (+ 16·i), chunk c of the 8 a row; swap: the odd-first order above (else the caller's
  // lanes put a store phase on distinct columns by themselves).
  __device__ __forceinline__ WsFp8Dst(__half* dst, int kBN, unsigned row0, unsigned c, bool swap) {
    const unsigned sw = row0 & 7;
    odd_first = swap && c >= 4;
    d = dst + (c / 4) * kBN * 64 + row0 * 64;
    const unsigned j0 = 2 * (c % 4) + (odd_first ? 1u : 0u), j1 = j0 ^ 1u;
    o0 = (j0 ^ sw) << 3;
    o1 = (j1 ^ sw) << 3;
  }
  // Chunk i's 16 codes (row tid / 8 + 16·i) converted and stored (kHiByImad: fp8x4_to_half2x2).
  template <typename KV, bool kHiByImad = false>
  __device__ __forceinline__ void store(int i, const uint4& codes) const {
    // The first store's 8 codes: dims 16·c + 8 .. + 15 where odd_first, else 16·c .. + 7.
    const uint32_t f0 = odd_first ? codes.z : codes.x, f1 = odd_first ? codes.w : codes.y;
    const uint32_t s0 = odd_first ? codes.x : codes.z, s1 = odd_first ? codes.y : codes.w;
    uint4 first, second;
    fp8x4_to_half2x2<KV, kHiByImad>(f0, first.x, first.y);
    fp8x4_to_half2x2<KV, kHiByImad>(f1, first.z, first.w);
    *reinterpret_cast<uint4*>(d + i * 16 * 64 + o0) = first;
    fp8x4_to_half2x2<KV, kHiByImad>(s0, second.x, second.y);
    fp8x4_to_half2x2<KV, kHiByImad>(s1, second.z, second.w);
    *reinterpret_cast<uint4*>(d + i * 16 * 64 + o1) = second;
  }
};
// O into its TMA buffer by stmatrix (prefill v4.25, session 37: level to +1.7% on the short rows;
// its store block below); 0: the four-byte stores before (A/B).
#ifndef FLASHSERVE_PREFILL_WS_O_STSM
#define FLASHSERVE_PREFILL_WS_O_STSM 1
#endif
// The rows' finish (finish_row: l's quad sum, 1/l, the lse) under the drain's last P·V
// (bench-only, 0: in the store after it; FA3's place, its finalize between the last P·V's
// issue and wait): l and m are final after the last tile's softmax, so a warpgroup's ~40
// instructions of shuffles, LG2 and the reciprocal's chain run while the last P·V does, not on
// the item boundary's path (session 47, not measured yet).
#ifndef FLASHSERVE_PREFILL_WS_EARLY_FINISH
#define FLASHSERVE_PREFILL_WS_EARLY_FINISH 0
#endif
// The lazy rescale (bench-only, 0; FA4's; not in the FP8 instances): FLASHSERVE_PREFILL_WS_LAZY=1
// moves a row's running max only when a tile's max exceeds it by more than kLazyMargin
// (online_softmax.cuh; p <= 2^8), and a consumer warp skips O's rescale where the factors of all
// its rows are 1 (a vote): at d 64 the rescale is 32 of a plain tile's 466 instructions a warp,
// at d 128 64. Session 40 call 9: -1..-5% at d 64, -3..+1% at d 128 (v4.1's lazy rescale at d 128
// was level too: bench/history/prefill.md "prefill v4.1", "Session 40").
#ifndef FLASHSERVE_PREFILL_WS_LAZY
#define FLASHSERVE_PREFILL_WS_LAZY 0
#endif
// The half tile (prefill v4.32, session 41): an item's last tile runs at 64 keys in a consumer
// warpgroup none of whose rows sees past the tile's first 64 keys (causal: the first warpgroup's
// on the diagonal; non-causal: a sequence whose last tile holds 64 keys or fewer): S by m64n64
// into registers of its own (into s's first half, ptxas serialized every wgmma for want of
// registers), the softmax over 64 columns, P's other half zeros (P·V stays whole: a branch
// between two P·V forms in the drain serialized them too). Not for an item of one tile (S(0) is
// issued before the rows' ranges are known). 1 (default): d 128's packed 128-key instances
// (16x1k causal +2.0-2.4%, 200 short prompts +1.8% / +4.1% non-causal); 2: every 128-key
// instance without FP8 (d 64 16x1k causal -1.5%, pages -0.4..-1.1%); 0: none, for A/B
// (bench/history/prefill.md "Session 41").
#ifndef FLASHSERVE_PREFILL_WS_HALF_DIAG
#define FLASHSERVE_PREFILL_WS_HALF_DIAG 1
#endif
// Packed K/V's TMA boxes (bench-only, 0: one box a tile's column block): FLASHSERVE_PREFILL_WS_KV_BOX_ROWS=16
// loads a tile as boxes of 16 rows, as TMA boxes of 16-token pages would, to time the TMA unit's
// cost of small boxes apart from the pages (compile prefill_cuda.cu with it too: the maps' box).
// Session 40 call 8: d 128 -20..-27%, d 64 -3% (~120 cycles a 2 KB box): 16-token pages stay with
// the row gather.
#ifndef FLASHSERVE_PREFILL_WS_KV_BOX_ROWS
#define FLASHSERVE_PREFILL_WS_KV_BOX_ROWS 0
#endif
// The row gather's copies (bench-only diagnosis of the pages' gap, session 43; 0: as they are):
// 1 none (the stages keep what they held: the consumers time alone, with the producer's staging
// and arrivals), 2 K's alone (V none), 3 each copy issued twice (the gather's cost doubled), 4
// each copy 4 bytes of its 16 (cp.async.ca: the instructions as they are, a quarter of the bytes);
// 5, packed K/V: V's TMA boxes skipped (what packed tiles pay for V's loads: session 43's 2 beat
// packed by 11%).
#ifndef FLASHSERVE_PREFILL_WS_GATHER_DIAG
#define FLASHSERVE_PREFILL_WS_GATHER_DIAG 0
#endif
// The view's divisions by multiply-highs at d 128 (prefill v4.26, session 38) and d 64 (v4.30,
// session 40): WsWorkOrderFast in item(); =0 gives the run-time divisions back, for A/B.
#ifndef FLASHSERVE_PREFILL_WS_FAST_DIV
#define FLASHSERVE_PREFILL_WS_FAST_DIV 1
#endif
// A head dim's instances without the transform's code, as the split ones' (bench-only, 0: none;
// for a head dim prefill_ws_split_logits does not split, d 256): the plain run and a masked loop
// without softcap and ALiBi; the host gives that head dim's calls with a transform to v3 (d 256:
// mma.sync) (prefill_cuda.cu).
#ifndef FLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD
#define FLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD 0
#endif
// The register path's lean producer (prefill FP8 v6, session 36; written in sessions 34-35 as three
// bench switches): no diagnosis branches (PrefillTmaMaps::fp8_diag reads 0 there: one branch a
// chunk and a copy of the tile loop for diagnosis 3 went, and ptxas predicates the loads instead
// of branching round them), the lanes of WsFp8PairedLanes (no odd-first selects) and e4m3's high
// halves by IMAD.HI (fp8x4_to_half2x2). The tile loop 890 -> 686 instructions; on an H100, 5
// passes: e5m2 2k over 30k 515-522 against 497-509 (+3%, 0.92 of the bf16 pages' 567), e4m3 by
// this path 472 against 455 (the copy path, which e4m3 pools keep, 463). Of the three parts only
// the lanes were timed alone (level). -DFLASHSERVE_PREFILL_WS_FP8_REG_LEAN=0: session 35's
// register path (A/B, and the diagnoses 1 and 3 there).
#ifndef FLASHSERVE_PREFILL_WS_FP8_REG_LEAN
#define FLASHSERVE_PREFILL_WS_FP8_REG_LEAN 1
#endif
inline constexpr bool kFp8RegLean = FLASHSERVE_PREFILL_WS_FP8_REG_LEAN != 0;
// PrefillTmaMaps::fp8_diag as the FP8 producer reads it: the copy path always, the register path
// where it is not lean.
template <bool kRegPath>
__device__ __forceinline__ int ws_fp8_diag(const PrefillTmaMaps& maps) {
  return kRegPath && kFp8RegLean ? 0 : maps.fp8_diag;
}
// The lean register path's lanes: lane bits b4..b0 of warp w take row 4·w + 2·b4 + b2 of a pass
// and chunk (b1 b0) + 4·b3, so a store phase (8 lanes, b4 and b3 fixed) is 4 chunks of two rows
// of opposite parity, whose swizzles put its first stores on 8 distinct 16-byte columns without
// the odd-first order (its 4 selects a chunk, on the integer pipe that the e4m3 conversions
// load). Rows and chunks as many as tid / 8 and tid % 8 give (a warp: 4 whole rows), so the
// loads stay as coalesced.
struct WsFp8PairedLanes {
  __device__ __forceinline__ static unsigned row(unsigned tid) {
    const unsigned l = tid % 32;
    return 4 * (tid / 32) + 2 * ((l >> 4) & 1u) + ((l >> 2) & 1u);
  }
  __device__ __forceinline__ static unsigned chunk(unsigned tid) {
    const unsigned l = tid % 32;
    return (l & 3u) + 4 * ((l >> 3) & 1u);
  }
};
template <int kBN, typename KV>
__device__ __forceinline__ void ws_fp8_convert_rows(const unsigned char* slot8, __half* dst, unsigned tid) {
  const WsFp8Dst out(dst, kBN, tid);
  const unsigned char* src = slot8 + (tid / 8) * 128 + (((tid % 8) ^ ((tid / 8) & 7)) << 4);
  // Software-pipelined: the next chunk's load is issued before this one's conversions and stores
  // (written in the loop's order, the loads waited out their latency one after another: the
  // compiler cannot move a shared load above stores it cannot tell apart from it).
  uint4 next = *reinterpret_cast<const uint4*>(src);
#pragma unroll
  for (int i = 0; i < kBN / 16; ++i) {
    const uint4 codes = next;
    if (i + 1 < kBN / 16) next = *reinterpret_cast<const uint4*>(src + (i + 1) * 16 * 128);
    out.store<KV>(i, codes);
  }
}

// Where an instance reads K and V from: packed rows (TMA), pages of the call's dtype (the row
// gather), or FP8 pages (the row gather, converted). One instance each, so that a packed
// instance holds none of the paged producer's code (prefill v4.22): in one instance for both,
// the producer's paths for pages at 24 registers spilled into the whole producer (d 128: 292
// local loads and 199 stores, a 248-byte stack, 20.4k instructions; packed alone: 3 and 3,
// 8.4k), and d 128's short packed rows ran 6-14% slower. The paged instances' path is the row
// gather since v4.23 (TMA page boxes of 16-token pages and the older cp.async gather, WsGather,
// went: +1-3% on paged rows; bench/history/prefill.md "Session 33").
// kPageBoxes: 16-bit pages of 128 tokens or more on 128-key tiles, without the logit transform,
// whole tiles by TMA page boxes (prefill_cuda.h says when the host takes them, and why they are
// instances of their own); kFp8Pages: FP8 pages, the codes copied into slots of their own and
// converted from there; kFp8RegPages: FP8 pages by the register path (above kFp8RegProducerRegs).
// (kPageBoxes last: the others' values, in their instances' names, as they were.)
enum class WsKv { kPacked, kPages, kFp8Pages, kFp8RegPages, kPageBoxes };
__host__ __device__ constexpr bool ws_fp8(WsKv kv) { return kv == WsKv::kFp8Pages || kv == WsKv::kFp8RegPages; }
template <int kHeadDim, int kRows, int kKeyTile, typename T, WsKv kKv>
using WsTraitsOf =
    PrefillWsTraits<kHeadDim, kRows, kKeyTile, T, kKv != WsKv::kPacked, ws_fp8(kKv), kKv == WsKv::kFp8RegPages>;

// The consumers' tile loops by the code a tile needs (prefill v4.20): kPlain no mask and no
// transform, kGeneral both where the tile and the call have them. (A third loop for masked
// tiles without the transform's code took the d 64 consumers from 25 local loads a general
// tile to 234, and d 128's from 0 to 54: left out.)
enum class TileKind { kPlain, kGeneral, kHalf };  // kHalf: FLASHSERVE_PREFILL_WS_HALF_DIAG's last tile
template <TileKind kKind>
using kind_c = std::integral_constant<TileKind, kKind>;
// a where kFirst, else b (FLASHSERVE_PREFILL_WS_HALF_DIAG: a tile's S registers by its columns).
template <bool kFirst, typename A, typename B>
__device__ __forceinline__ auto& pick_ref(A& a, B& b) {
  if constexpr (kFirst) {
    return a;
  } else {
    return b;
  }
}

// kTransform false: no code for the logit transform (launch_prefill_sm90_ws refuses calls with one).
template <int kHeadDim, int kRows, int kKeyTile, typename T, WsKv kKv, bool kTransform>
__global__ void __launch_bounds__(WsTraitsOf<kHeadDim, kRows, kKeyTile, T, kKv>::kThreads,
                                  WsTraitsOf<kHeadDim, kRows, kKeyTile, T, kKv>::kCtasPerSm)
    prefill_sm90_ws_kernel(const __grid_constant__ PrefillParams p, const __grid_constant__ PrefillTmaMaps maps) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  // kPaged: p.paged (launch_prefill_sm90_ws checks).
  constexpr bool kFp8 = ws_fp8(kKv), kFp8RegPath = kKv == WsKv::kFp8RegPages, kPaged = kKv != WsKv::kPacked;
  // No code for the logit transform, and the plain tile run (the bench switch gives its head dim
  // the same).
  constexpr bool kNoTransform = !kTransform || kHeadDim == FLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD;
  using Tr = WsTraitsOf<kHeadDim, kRows, kKeyTile, T, kKv>;
  using State = PipeState<Tr::kStages>;
  constexpr int kBN = Tr::kBlockN, kConsumers = Tr::kConsumers;
  constexpr bool kLazyRescale = FLASHSERVE_PREFILL_WS_LAZY != 0 && !kFp8;
  constexpr bool kHalfDiag = kBN == 128 && !kFp8 &&
                             (FLASHSERVE_PREFILL_WS_HALF_DIAG == 2 ||
                              (FLASHSERVE_PREFILL_WS_HALF_DIAG == 1 && kHeadDim == 128 && !kPaged));
  constexpr int kKvBoxRows = FLASHSERVE_PREFILL_WS_KV_BOX_ROWS > 0 ? FLASHSERVE_PREFILL_WS_KV_BOX_ROWS : kBN;
  static_assert(kBN % kKvBoxRows == 0, "whole boxes a tile");
  // FP8: the row gather copies 128-byte code rows (one column block of d 64's 16-bit rows).
  using RowGather = WsRowGather<kFp8 ? 64 : kHeadDim, kBN>;
  static_assert(!kPaged || RowGather::kSmemBytes == Tr::kRowSlotBytes,
                "the row slots' size does not depend on the head dim");
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw_addr = smem_u32(smem_raw);
  // Q's slots (kQSlots: the second one O's buffer, kTmaO), 1024-byte aligned, then the K and V rings.
  T* smem_q = reinterpret_cast<T*>(smem_raw + ((1024 - (raw_addr & 1023)) & 1023));
  T* smem_k = smem_q + Tr::kQSlots * Tr::kQElems;
  T* smem_v = smem_k + Tr::kStages * Tr::kTileElems;
  unsigned char* fp8_slots = reinterpret_cast<unsigned char*>(smem_v + Tr::kStages * Tr::kTileElems);  // FP8: K, V codes
  float* q_maxima = reinterpret_cast<float*>(fp8_slots + Tr::kFp8StageBytes);  // FP8: the consumer warps' max |q|
  uint64_t* bars = reinterpret_cast<uint64_t*>(fp8_slots + Tr::kFp8StageBytes + Tr::kFp8ScratchBytes);
  unsigned char* row_slots = reinterpret_cast<unsigned char*>(bars + Tr::kBarriers);  // WsRowGather's two (pages)
  int* item_slot = reinterpret_cast<int*>(row_slots + Tr::kRowSlotBytes);  // the dynamic scheduler's
  constexpr int kQ = Tr::kQSlots;
  const Pipeline<kQ> pipe_q{bars, bars + kQ};
  // One Q slot (maps.q_slots 1, or kQ 1): slot 0 in every phase, O's buffer the second slot's place.
  const bool two_q = kQ == 2 && maps.q_slots == 2;
  auto q_advance = [two_q](PipeState<kQ>& st) {
    if (two_q) {
      st.advance();
    } else {
      st.phase ^= 1u;
    }
  };
  const Pipeline<Tr::kStages> pipe_k{bars + 2 * kQ, bars + 2 * kQ + Tr::kStages};
  const Pipeline<Tr::kStages> pipe_v{bars + 2 * kQ + 2 * Tr::kStages, bars + 2 * kQ + 3 * Tr::kStages};
  const int tid = threadIdx.x, lane = tid % 32;
  static_assert(!kPaged || RowGather::kFits, "pages come by the row gather");
  const WsTrace trace(maps);
  if (tid == 128) trace.entry();
  const int num_m = (p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM;
  const WsWorkOrder order{num_m, p.num_heads * p.batch, maps.section};
  const int grid_items = num_m * order.pairs;  // the grid order's items
  // A CTA that walks several items reads its sequences' offsets from shared memory (kSeqCache).
  const bool walks = static_cast<int>(gridDim.x) < grid_items;
  const bool seq_cached = walks && p.batch + 1 <= Tr::kSeqCache;
  const bool counted = maps.sched != nullptr;  // the dynamic walk's counters (below)
  // WsVarlenOrder: its q tile prefix beside the cached offsets, or, for a batch of more
  // sequences than they take, alone in their room (3·kSeqCache entries).
  const bool varlen = walks && maps.varlen != 0 && p.batch + 1 <= 3 * Tr::kSeqCache;
  // The static walk (a launch without counters) over causal rows in zigzag units (maps.zigzag): CTA
  // c's positions 2c, 2c + 1, then on by units of two (zig_next) of WsWorkOrder's zigzag order
  // (zig: each position a grid order item, or a padding position, passed over), or, where the
  // walk takes WsVarlenOrder (varlen: q lengths that differ, a batch its prefix holds), of
  // WsVarlenOrder's zigzag (zig_walk alone); the producer hands the consumers the items.
  const bool zig_walk = maps.zigzag != 0 && walks && !counted;
  const bool zig = zig_walk && !varlen;
  // Items handed to the consumers by the producer (item_slot): the dynamic walk's, and the static
  // walk's over WsVarlenOrder (a launch without counters), which takes only the q tiles that exist,
  // or over the zigzag order; else both walk the grid order by themselves.
  const bool hands_over = counted || varlen || zig;
  // FLASHSERVE_PREFILL_WS_ITEM_AHEAD: the items handed over again, a 64-bit word a Q stage (the
  // count in the walk << 32 | the item), from int 6 of item_slot (8-byte aligned; seq_q moves
  // from int 5 to int 10).
  constexpr bool kItemAhead = FLASHSERVE_PREFILL_WS_ITEM_AHEAD != 0;
  constexpr bool kSerial = FLASHSERVE_PREFILL_WS_SERIAL != 0 && Tr::kConsumers == 2 && !kFp8 && !kHalfDiag;
  volatile uint64_t* ahead_slots = reinterpret_cast<volatile uint64_t*>(item_slot + 6);
  // FLASHSERVE_PREFILL_WS_SERIAL: its window's words (0.f to load, the sums' sink) before seq_q.
  float* serial_words = reinterpret_cast<float*>(item_slot + (kItemAhead ? 10 : 5));
  int* seq_q = item_slot + (kItemAhead ? 10 : 5) + (FLASHSERVE_PREFILL_WS_SERIAL != 0 ? 2 : 0);
  int* seq_k = seq_q + Tr::kSeqCache;
  int* seq_tiles = seq_cached ? seq_k + Tr::kSeqCache : seq_q;
  if (seq_cached) {
    for (int i = tid; i <= p.batch; i += Tr::kThreads) {
      seq_q[i] = p.cu_seqlens_q[i];
      seq_k[i] = kPaged ? (i < p.batch ? p.pages.seq_lens[i] : 0) : p.cu_seqlens_k[i];
    }
  }

  if (tid == 0) {
    // TMA stages complete by one arrival with their bytes, gathered ones by the 128 producer
    // threads' cp.async arrivals. Empty: one arrival a consumer warp.
    pipe_q.init(1, 4 * kConsumers);
    pipe_k.init(kPaged ? 128 : 1, 4 * kConsumers);
    pipe_v.init(kPaged ? 128 : 1, 4 * kConsumers);
    MBarrier::fence_init();
    if constexpr (kItemAhead) ahead_slots[0] = ahead_slots[1] = 0;  // (counts start at 1)
    if constexpr (FLASHSERVE_PREFILL_WS_SERIAL != 0) serial_words[0] = 0.f;
  }
  __syncthreads();
  if (tid == 128) trace.after_init();

  // Work item w = (q tile, head, sequence) in WsWorkOrder; one CTA an item, or persistent: every
  // CTA taking items blockIdx.x, + gridDim.x, ...; producer and consumers walk the same items,
  // and a skipped item (a q tile past its sequence's queries) is skipped by both. (A snake, every
  // other round reversed, balanced causal rows worse still: WsWorkOrder's sections make the item
  // sizes a sawtooth; bench/history/prefill.md, "prefill v4.8".) With maps.zigzag (causal
  // rows, prefill v4.40) the static walk takes a zigzag order instead
  // (WsWorkOrder's, or WsVarlenOrder's where the walk takes that order), two items at a time, a
  // long and a short q tile of one pair: units of about the same key tiles, handed to the
  // consumers as the dynamic walk's are. Or, with maps.sched, a
  // dynamic walk (FA3's): each CTA starts at item blockIdx.x and its producer claims the next by an
  // atomic add when it has issued the last one's loads (paged: thread 0 claims for the 128
  // producer threads, which read the claim from a slot after a named barrier) (so a CTA takes the next longest item as
  // it frees up: the hardware's dispatch of one CTA an item, without a CTA's start and end); the
  // producer hands each item to the consumers in item_slot, written before its Q stage's arrival
  // (the consumers read it after that stage's wait; an item without keys and the end, an item >=
  // grid_items, come with a plain arrival and no Q). Items are handed over by their index in
  // the grid order (WsVarlenOrder's walk too). Without counters (no pair taken) a batch of q lengths
  // that differ (maps.varlen) takes the static walk over WsVarlenOrder's items, handed over alike:
  // the q tiles that exist, not every one of the grid order (session 53).
  // One item's CTA view; false when it has nothing to do. Tiles start at key_base: the first
  // visible key, aligned down to a page box for paged TMA (keys before the first visible one are
  // the sequence's own, masked like any other). At d 128 the work order's and the pair's
  // divisions by multiply-highs (WsWorkOrderFast; the same items), their divisors made once a
  // CTA; =0 (A/B): run-time divisions. At d 64 too since v4.30 (session 40 call 4, 8 passes,
  // paired, against run-time divisions: 16x1k causal +1.9%, 16x1k +2.1%, skew causal +1.2%, 4x4k
  // causal +0.8%, 1x16k causal +0.8%, 16x1k causal in pages +1.8%; session 38's one 4-pass ab had
  // read 4x4k causal -2.7%). d 256 keeps run-time divisions (items of ~100 tiles; not measured).
  constexpr bool kFastDiv = FLASHSERVE_PREFILL_WS_FAST_DIV != 0 && (kHeadDim == 128 || kHeadDim == 64);
  const WsWorkOrderFast order_fast = kFastDiv ? WsWorkOrderFast(order, p.num_heads) : WsWorkOrderFast();
  // TMA page boxes (the kPageBoxes instances; the host launches them where maps.page_boxes).
  constexpr bool kBoxes = kKv == WsKv::kPageBoxes;
  static_assert(!kBoxes || (kBN == 128 && sizeof(T) == 2 && !kTransform), "page boxes: 16-bit, 128-key tiles");
  auto item = [&](int w, PrefillCta& cta, int& h, int& b, int& key_base, int& num_tiles) {  // w: the grid order's
    int m_tile, pair;
    if constexpr (kFastDiv) {
      order_fast.item(w, m_tile, pair, h, b);
    } else {
      order.item(w, m_tile, pair);
      h = pair % p.num_heads;
      b = pair / p.num_heads;
    }
    if (!cta.init(p, m_tile, h, b, Tr::kBlockM, kBN, kFp8 ? 1 : 2, seq_cached ? seq_q : nullptr,
                  seq_cached ? seq_k : nullptr))
      return false;
    key_base = kBoxes ? cta.cta_lo & ~(kBN - 1) : cta.cta_lo;  // boxes: tiles inside pages
    num_tiles = cta.cta_hi > cta.cta_lo ? (cta.cta_hi - key_base + kBN - 1) / kBN : 0;
    return true;
  };

  const int wg = tid / 128;
  if (wg == 0) {
    // ---- producer ----
    setmaxnreg_dec<Tr::kProducerRegs>();
    if (varlen) {
      // WsVarlenOrder's q tile prefix, by warp 0: a lane a run of sequences, a scan of the runs.
      // Here, not before the CTA's barrier: there its code changed the consumers' (their main
      // loop 2579 -> 2728 instructions at d 128).
      // A lane's run of q offsets, read once (from global memory where they are not cached: one
      // load a sequence, independent of the others), its tiles staged in the prefix's place.
      if (tid < 32) {
        const int* cu_q = seq_cached ? seq_q : p.cu_seqlens_q;
        const int per = (p.batch + 31) / 32, first = lane * per, last = min(p.batch, first + per);
        int sum = 0, q_prev = first < last ? cu_q[first] : 0;
#pragma unroll 4
        for (int b = first; b < last; ++b) {
          const int q_next = cu_q[b + 1];
          const int tiles = ws_q_tiles(q_next - q_prev, Tr::kBlockM, num_m);
          q_prev = q_next;
          seq_tiles[b] = tiles;
          sum += tiles;
        }
        int incl = sum;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
          const int t = __shfl_up_sync(0xffffffffu, incl, d);
          if (lane >= d) incl += t;
        }
        int run = incl - sum;
        for (int b = first; b < last; ++b) {
          const int tiles = seq_tiles[b];
          seq_tiles[b] = run;
          run += tiles;
        }
        if (lane == 31) {
          seq_tiles[p.batch] = incl;
          item_slot[4] = incl * p.num_heads;  // the walk's items (to_grid)
        }
      }
      if (kPaged) named_barrier_sync(kConsumers + 2, 128); else __syncwarp();
    }
    // Packed: one thread issues everything. Paged: all 128 gather.
    if (tid >= (kPaged ? 128 : 1)) return;
    if (tid == 0) {
      prefetch_tensor_map(&maps.q);
      if (Tr::kTmaO && maps.o_tma != 0) prefetch_tensor_map(&maps.o);
      if (!kPaged || kBoxes) {
        prefetch_tensor_map(&maps.k);
        prefetch_tensor_map(&maps.v);
      }
    }
    // The loads' L2 policies (prefill v4.36; maps.l2_hints, the host's default 2): K and V
    // evict_last where bit 0, Q evict_first where bit 1.
    auto kv_policy = [&]() { return (maps.l2_hints & 1) != 0 ? l2_evict_last_policy() : l2_evict_normal_policy(); };
    auto q_policy = [&]() { return (maps.l2_hints & 2) != 0 ? l2_evict_first_policy() : l2_evict_normal_policy(); };
    PipeState<kQ> sq;
    uint32_t handed = 0;  // FLASHSERVE_PREFILL_WS_ITEM_AHEAD: items handed over (thread 0)
    auto hand_ahead = [&](int w) {
      if constexpr (kItemAhead) ahead_slots[sq.index] = (static_cast<uint64_t>(++handed) << 32) | static_cast<uint32_t>(w);
    };
    // Q, into a slot the consumers are done with (its last item's S and, kTmaO, O store);
    // `traced`: the item's index for WsTrace.
    auto issue_q = [&](const PrefillCta& cta, int h, int w, int traced) {
      trace.stamp(traced, 28);
      pipe_q.producer_acquire(sq);
      if (hands_over) {
        item_slot[sq.index] = w;
        hand_ahead(w);
      }
      MBarrier::arrive_expect_tx(pipe_q.full_barrier(sq), Tr::kQBytes);
      const int q_row = static_cast<int>(cta.q0 + cta.row0);
      T* q_slot = smem_q + sq.index * Tr::kQElems;
      const uint64_t policy = q_policy();
#pragma unroll
      for (int c = 0; c < Tr::kBlocks; ++c)
        tma_load_3d(q_slot + c * Tr::kBlockM * 64, &maps.q, pipe_q.full_barrier(sq), c * 64, h, q_row, policy);
      q_advance(sq);
      trace.stamp(traced, 29);
      trace.value(traced, 30, w);
    };
    // The walk's next item. Dynamic: claimed by thread 0; paged, the 128 producer threads walk
    // the items and take the claim from one of two slots after the consumers' item slots, one
    // named barrier a claim (a slot is rewritten two claims later, after every thread's read).
    int claims = 0;
    // A claim wk of the walk as an item of the grid order, which the consumers walk, and
    // grid_items past the walk's end (WsVarlenOrder's walk; the grid order's claims are its
    // items). Its state comes from shared memory (item_slot[4]: the varlen walk's items) and
    // the constant bank. A compact loop index beside w cost the row gather's tile loop registers
    // at 24 (9 more instructions a tile at d 128); as it is, the tile loops differ from the grid
    // order's build by a few local accesses a tile (d 128: 216 instructions, 14 local, against
    // 219 and 12; 176 keys: 311 and 17 against 301 and 12); not inlined (a call), the
    // consumers' main loop grew and spilled.
    // The static walk's claims (thread 0's; every producer thread's first): zigzag positions
    // (zig_walk), else claim k of CTA c is c + k·gridDim.x.
    int static_claim = zig_walk ? WsWorkOrder::zig_first(static_cast<int>(blockIdx.x)) : static_cast<int>(blockIdx.x);
    const int zig_end = zig ? order.zig_items() : 0;
    auto to_grid = [&](int wk) {
      if (zig) {  // (wk: static_claim, moved past a padding position)
        const int g = order.zig_claim(wk, static_cast<int>(gridDim.x), zig_end);
        static_claim = wk;
        return g < 0 ? grid_items : g;
      }
      if (!varlen) return wk;
      if (wk >= item_slot[4]) return grid_items;
      int m_tile, pair;
      WsVarlenOrder{seq_tiles, p.batch, p.num_heads, maps.section}.item(wk, m_tile, pair, zig_walk);
      return order.index(m_tile, pair);
    };
    // The static walk over WsVarlenOrder (varlen without counters) claims in turn: claim k of
    // CTA c is WsVarlenOrder's item c + k·gridDim.x (thread 0 counts; paged, it hands the claim
    // over as the dynamic walk's); over the zigzag order alike. One to_grid a form: two inlined
    // grew the producer's walk by ~155 instructions.
    auto claim_next = [&] {
      if (counted) return static_cast<int>(gridDim.x + atomicAdd(maps.sched, 1u));
      static_claim = zig_walk ? WsWorkOrder::zig_next(static_claim, static_cast<int>(gridDim.x))
                              : static_claim + static_cast<int>(gridDim.x);
      return static_claim;
    };
    auto next_item = [&](int w) {
      if (!hands_over) return w + static_cast<int>(gridDim.x);
      if (!kPaged) return to_grid(claim_next());
      volatile int* claim = item_slot + 2 + (claims++ & 1);
      if (tid == 0) *claim = to_grid(claim_next());
      named_barrier_sync(kConsumers + 2, 128);
      return *claim;
    };
    // The dynamic walk's hand-over without a Q load (thread 0): an item without keys, or the end
    // (w >= total).
    auto hand_over = [&](int w) {
      if (!hands_over || tid != 0) return;
      pipe_q.producer_acquire(sq);
      item_slot[sq.index] = w;
      hand_ahead(w);
      MBarrier::arrive(pipe_q.full_barrier(sq));
      q_advance(sq);
    };
    // The dynamic walk's end: the consumers told, and the last CTA done leaves the counters at
    // zero for the next launch that takes them (every claim of this CTA is made).
    auto end_walk = [&] {
      if (!hands_over || tid != 0) return;
      hand_over(grid_items);
      if (!counted) return;  // (the static walk over WsVarlenOrder: no counters)
      __threadfence();
      if (atomicAdd(maps.sched + 1, 1u) == gridDim.x - 1) {
        __threadfence();  // every other CTA's claims before the reset
        atomicExch(maps.sched, 0u);
        atomicExch(maps.sched + 1, 0u);
      }
    };
    if constexpr (kPaged) {
      // Pages: the row gather, all 128 producer threads. Tile t's offsets are in slot t % 2,
      // staged while the copies of tile t - 1 are issued, from ids read one tile before that;
      // K(t) and V(t - 1) in the order below. The j-th K (and V) tile of the walk goes to stage
      // j % kStages: K and V tiles are as many an item, so one count (rows_done: the walk's
      // tiles before this item) serves both rings.
      auto slot = [&](int tile) { return row_slots + (tile & 1) * RowGather::kSlotBytes; };
      // The walk, its tile loop by page boxes (kBoxes) or by the row gather.
      auto walk = [&] {
        int rows_done = 0, traced = 0;
        for (int w = to_grid(static_claim); w < grid_items; w = next_item(w)) {
          PrefillCta cta;
          int h, b, key_base, num_tiles;
          if (!item(w, cta, h, b, key_base, num_tiles)) continue;
          if (num_tiles == 0) {
            hand_over(w);  // the consumers still write its rows (no keys: zeros)
            continue;
          }
          if (tid == 0) issue_q(cta, h, w, traced);
          ++traced;
          auto key0 = [&](int tile) { return key_base + tile * kBN; };
          const char* gk = RowGather::thread_base(cta.src.k_base, tid);
          const char* gv = RowGather::thread_base(cta.src.v_base, tid);
          typename RowGather::Ids ids;
          // The row gather's start: tile 0's offsets staged, tile 1's ids read.
          auto gather_start = [&] {
            ids = RowGather::read_ids(cta.src, key0(0), cta.cta_hi, tid);
            __syncwarp();  // the last item's copies have read both slots
            RowGather::stage(cta.src, slot(0), ids, key0(0), tid);
            ids = num_tiles > 1 ? RowGather::read_ids(cta.src, key0(1), cta.cta_hi, tid) : RowGather::no_ids();
            __syncwarp();
          };
          auto load_rows = [&](const Pipeline<Tr::kStages>& pipe, bool is_v, int tile) {
            const unsigned j = static_cast<unsigned>(rows_done + tile);
            const State st{static_cast<int>(j % Tr::kStages), (j / Tr::kStages) & 1u};
            pipe.producer_acquire(st);
            T* dst = (is_v ? smem_v : smem_k) + st.index * Tr::kTileElems;
            if (FLASHSERVE_PREFILL_WS_GATHER_DIAG != 1 && !(FLASHSERVE_PREFILL_WS_GATHER_DIAG == 2 && is_v))
              RowGather::copy(slot(tile), is_v ? gv : gk, dst, tid);
            if (FLASHSERVE_PREFILL_WS_GATHER_DIAG == 3) RowGather::copy(slot(tile), is_v ? gv : gk, dst, tid);
            MBarrier::arrive_on_cp_async(pipe.full_barrier(st));
          };
          // FP8: a tile's codes into its slot (K or V, by the tile's parity), a cp.async group
          // each (an empty group where there is no such tile: the waits below count groups) ...
          auto code_slot = [&](bool is_v, int tile) {
            return fp8_slots + ((tile & 1) * 2 + (is_v ? 1 : 0)) * kBN * kHeadDim;
          };
          auto copy_codes = [&](bool is_v, int tile) {
            if (tile < num_tiles && ws_fp8_diag<false>(maps) != 2)
              RowGather::copy(slot(tile), is_v ? gv : gk, reinterpret_cast<T*>(code_slot(is_v, tile)), tid);
            cp_async_commit();
          };
          // ... and, once this thread's copies have landed, its chunks converted into the stage (a
          // thread converts only what it copied: no barrier between the producer threads), made
          // visible to wgmma, and its arrival (the stage's 128).
          auto convert_codes = [&](const Pipeline<Tr::kStages>& pipe, bool is_v, int tile) {
            const unsigned j = static_cast<unsigned>(rows_done + tile);
            const State st{static_cast<int>(j % Tr::kStages), (j / Tr::kStages) & 1u};
            pipe.producer_acquire(st);
            __half* dst = reinterpret_cast<__half*>((is_v ? smem_v : smem_k) + st.index * Tr::kTileElems);
            const unsigned char* codes = code_slot(is_v, tile);
            if (ws_fp8_diag<false>(maps) == 1) {
              // (bench-only: the stage keeps what it held)
            } else if (p.pages.dtype == DType::kFp8E5M2 || ws_fp8_diag<false>(maps) == 3) {  // 3: e4m3 codes as e5m2 (bench-only)
              ws_fp8_convert_rows<kBN, __nv_fp8_e5m2>(codes, dst, tid);
            } else {
              ws_fp8_convert_rows<kBN, __nv_fp8_e4m3>(codes, dst, tid);
            }
            fence_proxy_async();
            MBarrier::arrive(pipe.full_barrier(st));
          };
          // Slot (t + 1) % 2 held tile t - 1's offsets, read by the copies issued before.
          auto stage_next = [&](int t) {
            if (t + 1 >= num_tiles) return;
            __syncwarp();
            RowGather::stage(cta.src, slot(t + 1), ids, key0(t + 1), tid);
            ids = t + 2 < num_tiles ? RowGather::read_ids(cta.src, key0(t + 2), cta.cta_hi, tid) : RowGather::no_ids();
            __syncwarp();
          };
          if constexpr (kFp8 && kFp8RegPath) {
            gather_start();
            // Register path (kFp8RegPath). A tile's codes (8 chunks a thread, 32 registers) are
            // converted chunk by chunk, and each freed chunk's registers load the same chunk of the
            // next tile in the consumers' order (K(0), K(1), V(0), K(2), V(1), ..., V(n - 1)), so
            // every load has a tile's conversion (and the producer's waits for free stages) to
            // arrive. Tile t + 1's offsets are staged before the conversion that loads K(t + 1),
            // after the loads of tile t - 1 (the slot's last readers) were issued.
            uint4 buf[kBN / 16];
            // This thread's row of a pass and its chunk of the row (WsFp8PairedLanes where lean,
            // else the row gather's tid / 8 and tid % 8), the valid bits' shift (the row's lane in
            // its staging warp) and the K and V bases.
            constexpr bool kPairedLanes = kFp8RegLean;
            const unsigned my_row = kPairedLanes ? WsFp8PairedLanes::row(tid) : tid / 8;
            const unsigned my_chunk = kPairedLanes ? WsFp8PairedLanes::chunk(tid) : tid % 8;
            const unsigned valid_shift = kPairedLanes ? my_row % 4 : (tid % 32) / 8;
            // (thread_base adds tid % 8 chunks: the difference is signed.)
            const int chunk_shift = (static_cast<int>(my_chunk) - static_cast<int>(tid % 8)) * 16;
            const char* rk = kPairedLanes ? RowGather::thread_base(cta.src.k_base + chunk_shift, tid) : gk;
            const char* rv = kPairedLanes ? RowGather::thread_base(cta.src.v_base + chunk_shift, tid) : gv;
            auto convert = [&](const Pipeline<Tr::kStages>& pipe, bool is_v, int tile, int next_tile, bool next_v) {
              const unsigned j = static_cast<unsigned>(rows_done + tile);
              const State st{static_cast<int>(j % Tr::kStages), (j / Tr::kStages) & 1u};
              pipe.producer_acquire(st);
              __half* const stage = reinterpret_cast<__half*>((is_v ? smem_v : smem_k) + st.index * Tr::kTileElems);
              const WsFp8Dst out = kPairedLanes ? WsFp8Dst(stage, kBN, my_row, my_chunk, false) : WsFp8Dst(stage, kBN, tid);
              // The next tile's offsets and valid rows (none past the item's last tile: no loads).
              const unsigned char* ns = slot(next_tile);
              const uint4* offs = reinterpret_cast<const uint4*>(ns) + my_row * (RowGather::kPad / 4);
              const uint32_t valid = next_tile < num_tiles
                                         ? reinterpret_cast<const uint32_t*>(ns + 16 * RowGather::kPad * 4)[tid / 32] >> valid_shift
                                         : 0u;
              const char* g = next_v ? rv : rk;
              auto run = [&](auto kv) {
                using KV = decltype(kv);
  #pragma unroll
                for (int q = 0; q < 2; ++q) {
                  const uint4 o = offs[q];
                  const uint32_t ow[4] = {o.x, o.y, o.z, o.w};
  #pragma unroll
                  for (int e = 0; e < 4; ++e) {
                    const int i = 4 * q + e;
                    if (ws_fp8_diag<true>(maps) != 1) out.store<KV, kFp8RegLean>(i, buf[i]);
                    buf[i] = RowGather::ldg16_or_zero(g + static_cast<uint64_t>(ow[e]) * 16, valid & (1u << (4 * i)));
                  }
                }
              };
              if (p.pages.dtype == DType::kFp8E5M2 || ws_fp8_diag<true>(maps) == 3) {
                run(__nv_fp8_e5m2{});
              } else {
                run(__nv_fp8_e4m3{});
              }
              fence_proxy_async();
              MBarrier::arrive(pipe.full_barrier(st));
            };
            static_assert(RowGather::kPad == 8 && kBN / 16 == 8, "8 rows a thread a tile");
            // K(0)'s codes (ow of slot 0; a convert's loads with nothing converted).
            {
              const uint32_t* offs = reinterpret_cast<const uint32_t*>(slot(0)) + my_row * RowGather::kPad;
              const uint32_t valid = reinterpret_cast<const uint32_t*>(slot(0) + 16 * RowGather::kPad * 4)[tid / 32] >> valid_shift;
  #pragma unroll
              for (int i = 0; i < kBN / 16; ++i)
                buf[i] = RowGather::ldg16_or_zero(rk + static_cast<uint64_t>(offs[i]) * 16, valid & (1u << (4 * i)));
            }
            stage_next(0);
            // n == 1: K(0), V(0); else K(0), K(1), then for t >= 1 K(t), V(t - 1).
            convert(pipe_k, false, 0, num_tiles > 1 ? 1 : 0, num_tiles == 1);
            for (int t = 1; t < num_tiles; ++t) {
              convert(pipe_k, false, t, t - 1, true);
              stage_next(t);
              const bool last = t + 1 == num_tiles;
              convert(pipe_v, true, t - 1, last ? t : t + 1, last);
            }
            convert(pipe_v, true, num_tiles - 1, num_tiles, true);  // nothing after it
          } else if constexpr (kFp8) {
            // Two code slots a ring: K(t + 1) is copied (its offsets just staged) before K(t) is
            // converted, V(t) before V(t - 1), so each copy has two conversions' time (a tile's
            // MMAs and more) to land; with one slot a ring (session 26) a copy had one, and the
            // producer set the pace (0.63 of the bf16 pages). A slot's previous codes were
            // converted by this thread in the iteration before (a thread converts only the chunks
            // it copied: no barrier). Groups, oldest first, at the K wait: K(t), V(t - 1),
            // K(t + 1); at the V wait: V(t - 1), K(t + 1), V(t) (V(-1) the prologue's empty one).
            gather_start();
            copy_codes(false, 0);
            cp_async_commit();  // V(-1)
            for (int t = 0; t < num_tiles; ++t) {
              stage_next(t);
              copy_codes(false, t + 1);
              cp_async_wait<2>();
              convert_codes(pipe_k, false, t);
              copy_codes(true, t);
              cp_async_wait<2>();
              if (t > 0) convert_codes(pipe_v, true, t - 1);
            }
            cp_async_wait<0>();
            convert_codes(pipe_v, true, num_tiles - 1);
          } else if constexpr (kBoxes) {
            // Page boxes (kBoxes): a tile all of whose keys exist as the page's column boxes from
            // thread 0 (its arrival with the bytes; the other producer threads' plain arrivals),
            // the sequence's last partial tile by the row gather (zeros past its keys), its
            // offsets read and staged when its K is issued.
            const int kv_head = h / (p.num_heads / p.num_kv_heads);
            auto load_box = [&](const Pipeline<Tr::kStages>& pipe, bool is_v, int tile) {
              const int k0 = key0(tile);
              if (k0 + kBN > cta.k_len) {
                if (!is_v) {  // (a warp stages the rows it copies)
                  const typename RowGather::Ids tail = RowGather::read_ids(cta.src, k0, cta.cta_hi, tid);
                  __syncwarp();
                  RowGather::stage(cta.src, slot(tile), tail, k0, tid);
                  __syncwarp();
                }
                return load_rows(pipe, is_v, tile);
              }
              const unsigned j = static_cast<unsigned>(rows_done + tile);
              const State st{static_cast<int>(j % Tr::kStages), (j / Tr::kStages) & 1u};
              pipe.producer_acquire(st);
              uint64_t* bar = pipe.full_barrier(st);
              if (tid == 0) {
                const int page = cta.src.table[k0 >> cta.src.block_shift];  // out of range: zeros
                T* dst = (is_v ? smem_v : smem_k) + st.index * Tr::kTileElems;
                MBarrier::arrive_expect_tx(bar, Tr::kTileBytes);
                const uint64_t policy = kv_policy();
  #pragma unroll
                for (int c = 0; c < Tr::kBlocks; ++c)
                  tma_load_4d(dst + c * kBN * 64, is_v ? &maps.v : &maps.k, bar, c * 64, k0 & cta.src.block_mask,
                              kv_head, page, policy);
              } else {
                MBarrier::arrive(bar);
              }
            };
            for (int t = 0; t <= num_tiles; ++t) {
              if (t < num_tiles) load_box(pipe_k, false, t);
              if (t > 0) load_box(pipe_v, true, t - 1);
            }
          } else {
            gather_start();
            for (int t = 0; t <= num_tiles; ++t) {
              if (t < num_tiles) load_rows(pipe_k, false, t);
              if (t > 0) load_rows(pipe_v, true, t - 1);
              stage_next(t);
            }
          }
          if (tid == 0) trace.stamp(traced - 1, 26);
          rows_done += num_tiles;
        }
      };
      walk();
      end_walk();
      cp_async_wait<0>();
    } else {
      // Packed: thread 0 alone, Q and the K/V tiles by TMA.
      State sk, sv;
      int traced = 0;
      for (int w = to_grid(static_claim); w < grid_items; w = next_item(w)) {
        PrefillCta cta;
        int h, b, key_base, num_tiles;
        if (!item(w, cta, h, b, key_base, num_tiles)) continue;
        if (num_tiles == 0) {
          hand_over(w);  // the consumers still write its rows (no keys: zeros)
          continue;
        }
        const int kv_head = h / (p.num_heads / p.num_kv_heads);
        issue_q(cta, h, w, traced);
        ++traced;
        auto load = [&](const Pipeline<Tr::kStages>& pipe, State& st, bool is_v, int tile) {
          pipe.producer_acquire(st);
          uint64_t* bar = pipe.full_barrier(st);
          T* dst = (is_v ? smem_v : smem_k) + st.index * Tr::kTileElems;
          if (FLASHSERVE_PREFILL_WS_GATHER_DIAG == 5 && is_v) {  // (bench-only: V's boxes skipped)
            MBarrier::arrive(bar);
            st.advance();
            return;
          }
          MBarrier::arrive_expect_tx(bar, Tr::kTileBytes);
          const int row = p.cu_seqlens_k[b] + key_base + tile * kBN;
          const uint64_t policy = kv_policy();
#pragma unroll
          for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
            for (int j = 0; j < kBN; j += kKvBoxRows)
              tma_load_3d(dst + c * kBN * 64 + j * 64, is_v ? &maps.v : &maps.k, bar, c * 64, kv_head, row + j,
                          policy);
          st.advance();
        };
        for (int t = 0; t <= num_tiles; ++t) {  // K(t) and V(t - 1)
          if (t < num_tiles) load(pipe_k, sk, false, t);
          if (t > 0) load(pipe_v, sv, true, t - 1);
        }
        trace.stamp(traced - 1, 26);
      }
      end_walk();
    }
    return;
  }

  // ---- consumers ----
  setmaxnreg_inc<Tr::kConsumerRegs>();
  const int cw = wg - 1;  // consumer warpgroup 0 .. kConsumers - 1
  const int ctid = tid - 128;
  const int gid = lane / 4, tig = lane % 4;
  const int wrow0 = cw * 64 + ((ctid / 32) % 4) * 16;
  const int wt = ctid % 128;  // the thread in its warpgroup
  const T* q_wg = smem_q + cw * 64 * 64;  // this warpgroup's 64 rows in each column block (slot 0)
  // Paged stages gathered by cp.async (the generic proxy) are made visible to wgmma (the async
  // proxy) by a proxy fence after the barrier's acquire: in the consumers' fenced walk (below).
  auto wait_stage = [&](const auto& pipe, const auto& st, auto fenced) {
    pipe.consumer_wait(st);
    if constexpr (decltype(fenced)::value) fence_proxy_async();
  };
  // Ping-pong round the ring: warpgroup cw issues its GEMMs after syncing on barrier 1 + cw and
  // then lets the next one go by arriving on its barrier. In each item each warpgroup has
  // num_tiles + 1 issue slots; the last one starts the first off and skips its own last
  // arrival, so the counts match (and the ring reaches the next item's first arrival only after
  // the first's last sync).
  const int my_bar = 1 + cw, next_bar = 1 + (cw + 1) % kConsumers;
  const bool last_wg = cw == kConsumers - 1;
  const bool o16 = ((reinterpret_cast<uintptr_t>(p.o) | static_cast<uintptr_t>(p.o_row_stride * 2) |
                     static_cast<uintptr_t>(p.o_head_stride * 2)) & 15) == 0;  // 16-byte stores of o
  // The low words of the operands' descriptors at stage 0 (issue_s, issue_pv).
  const uint32_t q_lo0 = kmajor_desc_lo(q_wg), k_lo0 = kmajor_desc_lo(smem_k);
  const uint32_t v_lo0 = static_cast<uint32_t>(Tr::kBlocks == 1 ? mnmajor_desc(smem_v) : mnmajor_desc_blocks(smem_v, kBN * 128));
  PipeState<kQ> sq;
  State sk, sv;
  // Two Q slots (kTmaO): a slot whose O this warpgroup stores by TMA is released by its warp 0
  // (whose thread 0 issued the store) only once the store has read it, at the next item's first
  // S or hand-over (the store runs on meanwhile; the other warps release at the last S, and the
  // slot's phase needs every warp's arrival).
  PipeState<kQ> q_held;
  bool holding = false;
  auto release_held = [&] {
    if constexpr (kQ == 2) {
      if (holding) {
        if (wt == 0) bulk_wait_read<0>();
        __syncwarp();
        pipe_q.consumer_release(q_held, lane);
        holding = false;
      }
    }
  };
  const bool stamper = ctid % 128 == 0;  // one thread a consumer warpgroup stamps (WsTrace)
  int traced = 0;
  auto stamp = [&](int event) {
    if (stamper) trace.stamp(traced, 8 * cw + event);
  };
  auto stamp_fine = [&](int step) {  // the item boundary's finer steps (WsTrace; two warpgroups:
    // with three, the third's own stamps take words 16-23)
    if (kConsumers == 2 && stamper) trace.stamp(traced, 16 + 4 * cw + step);
  };
  // FLASHSERVE_PREFILL_WS_ITEM_AHEAD: the dynamic walk's next item, read from its 64-bit slot
  // (the taken-th item handed over; lane 0 polls, the rewrite of a stage's slot waits for every
  // consumer warp's release of that Q stage, after its read) and its view, made under the drain.
  uint32_t taken = 0;
  auto read_ahead = [&](int stage) {
    ++taken;
    uint64_t v = 0;
    if (lane == 0) {
      do {
        v = ahead_slots[stage];
      } while (static_cast<uint32_t>(v >> 32) != taken);
    }
    return __shfl_sync(0xffffffffu, static_cast<int>(static_cast<uint32_t>(v)), 0);
  };
  PrefillCta cta_next;
  int w_next = 0, h_next = 0, b_next = 0, kb_next = 0, nt_next = 0;
  bool have_next = false;
  auto view_ahead = [&] {
    w_next = read_ahead(sq.index);
    if (w_next < grid_items) item(w_next, cta_next, h_next, b_next, kb_next, nt_next);  // (handed items have rows)
    have_next = true;
  };
  auto walk = [&](auto fenced) {
    for (int w = blockIdx.x;; w += gridDim.x) {
      PrefillCta cta;
      int h, b, key_base, num_tiles;
      // The item of the Q stage sq (dynamic walk): lane 0 reads the slot, the one lane whose
      // release of the stage (below) lets the producer rewrite it: so the read is ordered
      // before that rewrite in every lane's own program order.
      bool viewed = false;  // FLASHSERVE_PREFILL_WS_ITEM_AHEAD: the view made ahead
      if constexpr (kItemAhead) {
        if (hands_over) {
          if (!have_next) view_ahead();  // (the CTA's first item, or after one without keys)
          have_next = false;
          w = w_next;
          if (w >= grid_items) break;
          cta = cta_next;
          h = h_next;
          b = b_next;
          key_base = kb_next;
          num_tiles = nt_next;
          stamp_fine(0);
          viewed = true;
        }
      }
      if (!viewed) {
        if (hands_over) {
          pipe_q.consumer_wait(sq);  // the item's Q stage: its slot is written (a second wait below returns at once)
          int slot = 0;
          if (lane == 0) slot = item_slot[sq.index];
          w = __shfl_sync(0xffffffffu, slot, 0);
          stamp_fine(0);
        }
        if (w >= grid_items) break;
        if (!item(w, cta, h, b, key_base, num_tiles)) continue;  // never a handed-over item
      }
      if (hands_over && num_tiles == 0) {
        if constexpr (kItemAhead) pipe_q.consumer_wait(sq);  // (not waited for above)
        pipe_q.consumer_release(sq, lane);  // a hand-over without Q
        q_advance(sq);
        release_held();
      }
      // O by TMA (below), into this warpgroup's rows of the item's Q slot: where the instance has
      // the second slot, the host a map (maps.o_tma), the item a Q (keys) and the warpgroup's 64
      // rows are all the sequence's.
      const PipeState<kQ> q_st = sq;
      const bool tma_o = Tr::kTmaO && maps.o_tma != 0 && num_tiles > 0 && cta.block_rows >= 64 * (cw + 1);
      const bool hold_q = two_q && tma_o && wt < 32;  // this warp releases the slot after the store
      const uint32_t q_lo_item = q_lo0 + static_cast<uint32_t>(q_st.index) * (Tr::kQElems / 8);
      stamp(0);
      if (ctid == 0) {
        trace.value(traced, 24, w);
        trace.value(traced, 25, num_tiles);
      }
      // The rows' key ranges and the logits' constants (ALiBi's slope a global load), which only
      // the first softmax needs: made under S(0), after its issue (FP8: the constants before,
      // its Q conversion folds into them). Made before S(0), they held its issue back by ~150
      // instructions an item (d 64, bench/history/prefill.md "Session 40").
      int row_pos[2], row_lo[2], row_hi[2];
      LogitArgs la;  // FP8: k_scale / 2^e folded into its scales below
      bool half_last = false;  // kHalfDiag: the last tile at 64 keys in this warpgroup
      auto init_rows = [&] {
        if constexpr (kHalfDiag) {
          // A row's high bound grows with the row: the warpgroup's last row has its highest.
          const int r = min(64 * cw + 63, cta.block_rows - 1);
          int64_t lo = 0, hi = 0;
          visible_keys(p.mask, cta.pos0 + cta.row0 + r, 0, cta.k_len, &lo, &hi);
          half_last = hi - (key_base + static_cast<int64_t>(num_tiles - 1) * kBN) <= kBN / 2;
          half_last = __shfl_sync(0xffffffffu, half_last, 0);  // warp-uniform for ptxas (wgmma in its branches)
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int r = wrow0 + gid + 8 * i;
          row_pos[i] = static_cast<int>(cta.pos0 + cta.row0 + r);
          int64_t lo = 0, hi = 0;
          if (r < cta.block_rows) visible_keys(p.mask, cta.pos0 + cta.row0 + r, 0, cta.k_len, &lo, &hi);
          row_lo[i] = static_cast<int>(lo);
          row_hi[i] = static_cast<int>(hi);
        }
        if constexpr (!kFp8) la = LogitArgs(p.mask, h);
      };
      float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f};
      float o[Tr::kBlocks][32];
#pragma unroll
      for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
        for (int e = 0; e < 32; ++e) o[c][e] = 0.f;
      float v_mul = 1.f;  // FP8: the values' scale on the output
      // The rows' 1/l and lse (FLASHSERVE_PREFILL_WS_EARLY_FINISH: made under the drain's P·V,
      // which items with keys have).
      constexpr bool kEarlyFinish = FLASHSERVE_PREFILL_WS_EARLY_FINISH != 0;
      float fin_inv[2] = {0.f, 0.f}, fin_lse[2] = {-INFINITY, -INFINITY};

      float s[kBN / 2];
      // kHalfDiag: S of a half tile in registers of its own (m64n64 into s's first half made ptxas
      // serialize every wgmma: "insufficient register resources for the wgmma pipeline").
      float sh[kHalfDiag ? kBN / 4 : 1];
      using kFull = std::integral_constant<int, kBN>;  // a tile's columns (kHalfDiag: kBN / 2 on its last)
      // Descriptors from their low words (start address / 16, leading offset), made once: each
      // wgmma's is that word plus its byte offset / 16 (one uniform add), the high word a constant
      // (prefill v4.11). Made at each issue from the address, a K or V descriptor took an add, a
      // mask, a shift and an or, a dependent chain before each wgmma inside the ping-pong's issue
      // window: with Q's (below) ~100 of the 703 instructions a warp issued a 128 x 176 tile (ncu,
      // d 128 1x16k, bench/history/prefill.md "prefill v4.11").
      auto issue_s_cols = [&](int stage, auto cols) {
        constexpr int kCols = decltype(cols)::value;
        // K's (and V's, issue_pv) broadcast like Q's below (prefill v4.20): the stage index lives
        // in a vector register, so at d 128 (128 keys) and d 64 each descriptor's adds ran in
        // vector registers and 33 R2UR a tile (d 64: 25) moved them to uniform ones, most of
        // them after the ping-pong's barrier; now one SHFL and one R2UR each, the adds uniform
        // (the 176-key, d 256 and FP8 instances had them uniform already: the same instructions
        // there but for the integer ops' variants ptxas picks).
        const uint32_t k_lo = __shfl_sync(0xffffffffu, k_lo0 + stage * (Tr::kTileElems / 8), 0);
        // Q's descriptors: hoisted out of the tile loop by the compiler they were 16 live
        // registers (d 128; 32 at d 256, where they spilled with the next barrier id) moved to
        // uniform registers before each wgmma. Here each is one add to a low word made at each
        // issue: the volatile move keeps it from being hoisted, the broadcast makes it
        // warp-uniform (the compiler issues it before the ping-pong's barrier), so the adds run in
        // uniform registers.
        uint32_t q_lo = q_lo_item;
        asm volatile("mov.b32 %0, %0;\n" : "+r"(q_lo));
        q_lo = __shfl_sync(0xffffffffu, q_lo, 0);
#pragma unroll
        for (int ks = 0; ks < Tr::kKSteps; ++ks) {
          const int blk = ks / 4, col = (ks % 4) * 16;  // elements / 8 = bytes / 16
          wgmma_ss<kCols, T>(pick_ref<kCols == kBN>(s, sh),
                             kmajor_desc_from_lo(q_lo + (blk * Tr::kBlockM * 64 + col) / 8),
                             kmajor_desc_from_lo(k_lo + (blk * kBN * 64 + col) / 8), ks > 0);
        }
        wgmma_commit();
      };
      uint32_t pa[Tr::kKeySteps][4];
      auto pack_p_cols = [&](auto cols) {
        auto& sc = pick_ref<decltype(cols)::value == kBN>(s, sh);
#pragma unroll
        for (int kk = 0; kk < decltype(cols)::value / 16; ++kk) {
          pa[kk][0] = pack2<T>(sc[8 * kk + 0], sc[8 * kk + 1]);
          pa[kk][1] = pack2<T>(sc[8 * kk + 2], sc[8 * kk + 3]);
          pa[kk][2] = pack2<T>(sc[8 * kk + 4], sc[8 * kk + 5]);
          pa[kk][3] = pack2<T>(sc[8 * kk + 6], sc[8 * kk + 7]);
        }
        // (Half a tile: the rest of pa ends here, else the last full P stays live across it.)
#pragma unroll
        for (int kk = decltype(cols)::value / 16; kk < Tr::kKeySteps; ++kk) pa[kk][0] = pa[kk][1] = pa[kk][2] = pa[kk][3] = 0u;
      };
      auto issue_pv_cols = [&](int stage, auto cols) {
        const uint32_t v_lo = __shfl_sync(0xffffffffu, v_lo0 + stage * (Tr::kTileElems / 8), 0);  // (issue_s)
        // One wgmma a k-step over the whole head dim (N = kHeadDim: the column blocks of V are
        // kBN rows apart), not one a column block.
#pragma unroll
        for (int kk = 0; kk < decltype(cols)::value / 16; ++kk) {
          const uint64_t b = sw128_desc_from_lo(v_lo + kk * 16 * 64 / 8);
          if constexpr (Tr::kBlocks == 1) {
            wgmma_rs_n64<T>(o[0], pa[kk], b);
          } else {
            wgmma_rs<kHeadDim, T>(reinterpret_cast<float(&)[kHeadDim / 2]>(o), pa[kk], b);
          }
        }
        wgmma_commit();
      };
      float f[2] = {1.f, 1.f};
      // A tile's softmax by kind (TileKind: the code a tile loop holds): kPlain, a tile of the
      // plain run below (no mask, no transform); kGeneral, both as the tile and the call need them.
      auto softmax = [&](int tile, auto kind) {
        constexpr TileKind kKind = decltype(kind)::value;
        const int key0 = key_base + tile * kBN;
        constexpr bool kAll = kKind != TileKind::kPlain, kHalf = kKind == TileKind::kHalf;
        const bool masked = kHalf || (kAll && cta.masked(key0, kBN));
        auto& sc = pick_ref<!kHalf>(s, sh);
        softmax_row_pair<(kHalf ? kBN / 2 : kBN) / 8, kAll && !kNoTransform, kAll, kLazyRescale>(
            [&](int i, int nt, int e) -> float& { return sc[4 * nt + 2 * i + e]; }, la, key0, tig, row_pos, row_lo,
            row_hi, masked, m_run, l_run, f);
      };
      auto rescale_o = [&] {
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
            for (int n = 0; n < 8; ++n) {
              o[c][4 * n + 2 * i] *= f[i];
              o[c][4 * n + 2 * i + 1] *= f[i];
            }
      };
      [[maybe_unused]] int slots_left = num_tiles + 1;
      // (One consumer warpgroup, kWsPair: no ping-pong; the other CTA's GEMMs fill the gaps.)
      constexpr bool kPingPong = kConsumers > 1;
      auto sched_wait = [&] {
        if constexpr (kPingPong) named_barrier_sync(my_bar, 256);
      };
      auto sched_arrive = [&] {
        if constexpr (kPingPong) {
          if (--slots_left > 0 || !last_wg) named_barrier_arrive(next_bar, 256);
        }
      };

      if constexpr (kSerial) {  // (FLASHSERVE_PREFILL_WS_SERIAL: one slot a tile, its softmax)
        if (num_tiles > 0) {
          slots_left = num_tiles;
          if (last_wg) named_barrier_arrive(next_bar, 256);
          pipe_q.consumer_wait(sq);
          stamp(1);
          int plain_lo = num_tiles, plain_hi = num_tiles;
          auto serial_tile = [&](int t, auto kind) {
            wait_stage(pipe_k, sk, fenced);
            wgmma_fence();
            issue_s_cols(sk.index, kFull{});
            if (t == 0) {
              release_held();  // the last item's Q slot, under this S
              init_rows();     // ... and the rows' ranges
            }
            wgmma_wait<0>();
            fence_regs(s);
            pipe_k.consumer_release(sk, lane);
            sk.advance();
            if (t == num_tiles - 1 && !hold_q) pipe_q.consumer_release(sq, lane);  // the item's last S has retired
            sched_wait();
            {  // the window's pin (the comment at FLASHSERVE_PREFILL_WS_SERIAL's definition)
              float z;
              asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(z) : "r"(smem_u32(serial_words)) : "memory");
              s[0] += z;
              s[2] += z;
            }
            softmax(t, kind);
            asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(smem_u32(serial_words + 1)), "f"(l_run[0] + l_run[1])
                         : "memory");
            sched_arrive();
            if (t > 0 && (!kLazyRescale || __any_sync(0xffffffffu, f[0] != 1.f || f[1] != 1.f))) rescale_o();
#pragma unroll
            for (int c = 0; c < Tr::kBlocks; ++c) fence_regs(o[c]);
            pack_p_cols(kFull{});
            fence_regs(pa);
            wait_stage(pipe_v, sv, fenced);
            wgmma_fence();
            issue_pv_cols(sv.index, kFull{});
            if (t == num_tiles - 1) {
              if constexpr (kEarlyFinish) {
#pragma unroll
                for (int i = 0; i < 2; ++i) fin_inv[i] = finish_row(m_run[i], l_run[i], &fin_lse[i]) * v_mul;
              }
            }
            wgmma_wait<0>();
#pragma unroll
            for (int c = 0; c < Tr::kBlocks; ++c) fence_regs(o[c]);
            pipe_v.consumer_release(sv, lane);
            sv.advance();
          };
          serial_tile(0, kind_c<TileKind::kGeneral>{});
          stamp(4);
          if (kNoTransform && maps.plain != 0 && !la.transform) {  // (the overlapped loop's plain run, below)
            const int64_t first = cta.lo_last - key_base, end = min(cta.hi_first, cta.k_len) - key_base;
            plain_lo = max(1, static_cast<int>(first > 0 ? (first + kBN - 1) / kBN : 0));
            plain_hi = end <= 0 ? 0 : end / kBN < num_tiles ? static_cast<int>(end / kBN) : num_tiles;
            plain_hi = max(plain_hi, plain_lo);
          }
          for (int t = 1; t < num_tiles; ++t) {
            if constexpr (kNoTransform) {
              if (t == plain_lo) {
                for (; t < plain_hi; ++t) serial_tile(t, kind_c<TileKind::kPlain>{});
                if (t == num_tiles) break;
              }
            }
            serial_tile(t, kind_c<TileKind::kGeneral>{});
          }
          stamp(5);
          q_advance(sq);
          if constexpr (kItemAhead) {
            if (hands_over) view_ahead();  // the next item's (sq: its Q stage since q_advance above)
          }
          stamp(6);
        }
      }
      if (!kSerial && num_tiles > 0) {
        if (kPingPong && last_wg) named_barrier_arrive(next_bar, 256);
        pipe_q.consumer_wait(sq);
        if constexpr (kFp8) {
          la = LogitArgs(p.mask, h);
          // This warpgroup's 64 rows of Q (TMA wrote the call's bf16 or fp16) into fp16 in place,
          // as q·2^e with the rows' max |q|·2^e < 2^15 (fp16's max is 65504; 2^e comes off the
          // logits' scale with k_scale, as in the mma.sync kernel's FP8 instance): a max over the
          // warpgroup, then each thread converts the chunks it read, fences them for wgmma.
          const bool bf16 = p.dtype == DType::kBFloat16;
          const int bar_q = kConsumers + 3 + cw;
          auto q_chunk = [&](int k) {  // chunk k of this thread: 512 a column block, 4 a thread
            return reinterpret_cast<uint4*>(smem_q + (k / 4) * Tr::kBlockM * 64 + cw * 64 * 64) + wt + 128 * (k % 4);
          };
          // Rows past the sequence's queries (the TMA box reads on into the next sequence's)
          // take no part in the max, and are zeroed.
          auto in_rows = [&](int k) { return cw * 64 + wt / 8 + 16 * (k % 4) < cta.block_rows; };
          float mx = 0.f;
#pragma unroll
          for (int k = 0; k < 4 * Tr::kBlocks; ++k) {
            float f[8];
            chunk_to_float(*q_chunk(k), bf16, f);
#pragma unroll
            for (int j = 0; j < 8; ++j) mx = in_rows(k) ? fmaxf(mx, fabsf(f[j])) : mx;
          }
#pragma unroll
          for (int o = 16; o > 0; o /= 2) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
          if (lane == 0) q_maxima[4 * cw + wt / 32] = mx;
          named_barrier_sync(bar_q, 128);
          mx = fmaxf(fmaxf(q_maxima[4 * cw], q_maxima[4 * cw + 1]), fmaxf(q_maxima[4 * cw + 2], q_maxima[4 * cw + 3]));
          float q_mul = 1.f;
          // At most 2^64 up: q below 2^-50 everywhere keeps the fold a normal float.
          if (mx > 0.f && isfinite(mx)) q_mul = ldexpf(1.f, min(64, 14 - ilogbf(mx)));
#pragma unroll
          for (int k = 0; k < 4 * Tr::kBlocks; ++k) {
            float f[8];
            uint4* c = q_chunk(k);
            chunk_to_float(*c, bf16, f);
            *c = in_rows(k) ? make_uint4(pack2<__half>(f[0] * q_mul, f[1] * q_mul), pack2<__half>(f[2] * q_mul, f[3] * q_mul),
                                         pack2<__half>(f[4] * q_mul, f[5] * q_mul), pack2<__half>(f[6] * q_mul, f[7] * q_mul))
                            : make_uint4(0, 0, 0, 0);
          }
          fence_proxy_async();
          named_barrier_sync(bar_q, 128);  // also: every read of q_maxima before the next item's writes
          const int kv_head = h / (p.num_heads / p.num_kv_heads);
          const float fold = p.pages.k_scales[kv_head] / q_mul;  // logits = scale · k_scale · (q·2^e)·code / 2^e
          la.scale *= fold;
          la.scale2 *= fold;
          v_mul = p.pages.v_scales[kv_head];
        }
        stamp(1);
        wait_stage(pipe_k, sk, fenced);
        stamp(2);
        sched_wait();
        stamp(3);
        wgmma_fence();
        issue_s_cols(sk.index, kFull{});
        sched_arrive();
        release_held();  // the last item's Q slot, under this S
        init_rows();     // ... and the rows' ranges
        wgmma_wait<0>();
        fence_regs(s);
        pipe_k.consumer_release(sk, lane);
        sk.advance();
        if (num_tiles == 1 && !hold_q) pipe_q.consumer_release(sq, lane);  // the item's last S has retired
        softmax(0, kind_c<TileKind::kGeneral>{});
        pack_p_cols(kFull{});
        stamp(4);
        // The plain run (prefill v4.20): tiles [plain_lo, plain_hi) need no mask (no row's range
        // ends inside them: PrefillCta::masked) and, without a transform (softcap, ALiBi), take
        // a tile loop without the mask's and the transform's code. With them in the one loop,
        // its body held every path (d 64: 2892 instructions, 13 local loads and 4 stores a tile
        // at 160 registers; d 128: 2619); the plain loop is one block (d 64: 478 instructions, 6
        // local loads, 1 store; d 128 would be 521, none). FA3 splits its loop alike. d 64 only: there
        // the plain run took the ws kernel +12-14% (session 32 call 5, 1x16k and 4x4k, against
        // the general loop for all tiles); at d 128 both loops in the kernel ran the long rows
        // 2-5% under v4.18's one loop, the plain run or not (the second loop changed ptxas's
        // schedule of the first), and d 256 came out even. Since v4.27 the instances without the
        // transform's code have it (d 64 and 128: prefill_ws_split_logits), the others not (a
        // call with a transform never takes it). maps.plain 0: every tile in the general loop (A/B).
        int plain_lo = num_tiles, plain_hi = num_tiles;
        if (kNoTransform && maps.plain != 0 && !la.transform) {
          const int64_t first = cta.lo_last - key_base, end = min(cta.hi_first, cta.k_len) - key_base;
          plain_lo = max(1, static_cast<int>(first > 0 ? (first + kBN - 1) / kBN : 0));
          plain_hi = end <= 0 ? 0 : end / kBN < num_tiles ? static_cast<int>(end / kBN) : num_tiles;
          plain_hi = max(plain_hi, plain_lo);
        }
        auto tile = [&](int t, auto kind) {
          constexpr int kCols = decltype(kind)::value == TileKind::kHalf ? kBN / 2 : kBN;
          wait_stage(pipe_k, sk, fenced);
          sched_wait();
          wgmma_fence();
          issue_s_cols(sk.index, std::integral_constant<int, kCols>{});
          wait_stage(pipe_v, sv, fenced);
          wgmma_fence();
          issue_pv_cols(sv.index, kFull{});
          sched_arrive();
          wgmma_wait<1>();  // S(t) is in; P(t-1)·V(t-1) may still run
          fence_regs(pick_ref<kCols == kBN>(s, sh));
          pipe_k.consumer_release(sk, lane);
          sk.advance();
          if (t == num_tiles - 1 && !hold_q) pipe_q.consumer_release(sq, lane);
          softmax(t, kind);
          fence_regs(pick_ref<kCols == kBN>(s, sh));  // the softmax stays above the next wait, under P(t-1)·V(t-1)
          // (In the plain loop, one block, ptxas hoists the wait above the softmax anyway: SASS
          // DEPBAR 1, DEPBAR 0, then the EX2s. A block boundary kept them under it, and cost
          // 3-6% at d 128 16x1k and on causal rows: session 32 call 3.)
          wgmma_wait<0>();
          fence_regs(pa);
#pragma unroll
          for (int c = 0; c < Tr::kBlocks; ++c) fence_regs(o[c]);
          pipe_v.consumer_release(sv, lane);
          sv.advance();
          // O by this tile's factor here, once P(t-1)·V(t-1) is in, for P(t)·V(t) next (prefill
          // v4.20, FA3's place): between S(t)'s and P(t-1)·V(t-1)'s issues, as it was, ptxas put
          // the 64 FMULs (d 128) before S(t)'s first wgmma, inside the ping-pong's window after
          // the barrier, where the other warpgroup waits. The same products in the same order.
          if (!kLazyRescale || __any_sync(0xffffffffu, f[0] != 1.f || f[1] != 1.f)) rescale_o();
#pragma unroll
          for (int c = 0; c < Tr::kBlocks; ++c) fence_regs(o[c]);  // not sunk below the next barrier
          pack_p_cols(std::integral_constant<int, kCols>{});
        };
        // (kHalfDiag: the last tile, where half_last, after the loop.)
        const int t_end = kHalfDiag && half_last ? num_tiles - 1 : num_tiles;
        for (int t = 1; t < t_end; ++t) {
          if constexpr (kNoTransform) {
            if (t == plain_lo) {
              for (; t < plain_hi; ++t) tile(t, kind_c<TileKind::kPlain>{});
              if (cw == 0 && stamper) {  // (WsTrace: the plain run's end, words 27 and 31)
                trace.stamp(traced, 27);
                trace.value(traced, 31, plain_lo | plain_hi << 16 | static_cast<long long>(t_end) << 32);
              }
              if (t == t_end) break;
            }
          }
          tile(t, kind_c<TileKind::kGeneral>{});
        }
        if constexpr (kHalfDiag) {
          if (t_end < num_tiles && num_tiles > 1) tile(num_tiles - 1, kind_c<TileKind::kHalf>{});
        }
        stamp(5);
        q_advance(sq);
        // (O holds the last tile's factor: the loop's last tile, or, with one tile, zeros.)
        wait_stage(pipe_v, sv, fenced);
        sched_wait();
        wgmma_fence();
        issue_pv_cols(sv.index, kFull{});  // (kHalfDiag: P's other half zeros, pack_p_cols)
        sched_arrive();
        if constexpr (kEarlyFinish) {
#pragma unroll
          for (int i = 0; i < 2; ++i) fin_inv[i] = finish_row(m_run[i], l_run[i], &fin_lse[i]) * v_mul;
        }
        if constexpr (kItemAhead) {
          if (hands_over) view_ahead();  // the next item's (sq: its Q stage since q_advance above)
        }
        wgmma_wait<0>();
#pragma unroll
        for (int c = 0; c < Tr::kBlocks; ++c) fence_regs(o[c]);
        stamp(6);
        pipe_v.consumer_release(sv, lane);
        sv.advance();
      }

      // Normalise and store: o in the storage type, lse in natural log (the producer is loading
      // the next item meanwhile). Where tma_o (above): into the item's Q slot (by stmatrix, below;
      // or 4-byte stores in the accumulators' layout, 128-byte swizzled: a warp's 32 lanes on 32
      // banks), then one thread's TMA store of the 64 rows, which runs on while the warpgroup
      // takes its next item (the store from registers took 1.1-1.2 us an item at d 128 and held
      // up the next item's loads: session 17's trace). Else from registers: where o allows
      // (o16), 16 bytes a store (quad_transpose: thread tig writes columns 8·(4g + tig) .. + 7 of
      // each column block, g = 0, 1; a quad 64 contiguous bytes), else 4 bytes a store.
      // FP8: o in the call's dtype (bf16 or fp16; T is the MMAs' fp16).
      auto pk = [&](float a, float b) -> uint32_t {
        if constexpr (kFp8) {
          return p.dtype == DType::kBFloat16 ? pack2<__nv_bfloat16>(a, b) : pack2<__half>(a, b);
        } else {
          return pack2<T>(a, b);
        }
      };
      // Row i's 1/l (times the values' scale) and lse: made under the drain where kEarlyFinish.
      auto row_inv = [&](int i, float& lse) {
        if (kEarlyFinish && num_tiles > 0) {
          lse = fin_lse[i];
          return fin_inv[i];
        }
        return finish_row(m_run[i], l_run[i], &lse) * v_mul;
      };
      const int bar_o = kConsumers + 3 + cw;  // (FP8's Q barrier: never both)
      // This warpgroup's rows of the item's Q slot in column block 0 (block c: + c·kBlockM·64):
      // the slot's last O store has read it (release_held, before its Q was loaded); the barrier
      // has every warp's last S retired before any writes. One Q slot: O's buffer, once the last
      // item's store has read it.
      T* o_wg = smem_q + (two_q ? q_st.index : 1) * Tr::kQElems + cw * 64 * 64;
      if (tma_o) {
        if (!two_q && wt == 0) bulk_wait_read<0>();
        named_barrier_sync(bar_o, 128);
      }
      stamp_fine(1);
      // FLASHSERVE_PREFILL_WS_O_STSM (default 1, prefill v4.25): O into its buffer by stmatrix, 8 a
      // thread at d 128 instead of 32 four-byte stores (the same bytes, swizzle and banks); 0: the
      // four-byte stores (v4.24's SASS, for A/B).
      constexpr bool kStsm = FLASHSERVE_PREFILL_WS_O_STSM != 0;
      if constexpr (kStsm) {
        if (tma_o) {
          float inv2[2];
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            float lse;
            inv2[i] = row_inv(i, lse);
            const int r = wrow0 + gid + 8 * i;
            const int64_t row = cta.q0 + cta.row0 + r;
            if (p.lse != nullptr && tig == 0 && r < cta.block_rows) p.lse[row * p.num_heads + h] = lse;
          }
          // Lane l: row l % 8 of matrix l / 8 = (rows + 8·(j % 2), chunk n0 + j / 2).
          const int j = lane / 8, q = lane % 8;
          T* mrow = o_wg + (wrow0 - 64 * cw + 8 * (j % 2) + q) * 64;
#pragma unroll
          for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
            for (int n0 = 0; n0 < 8; n0 += 2) {
              const uint32_t r4[4] = {pk(o[c][4 * n0] * inv2[0], o[c][4 * n0 + 1] * inv2[0]),
                                      pk(o[c][4 * n0 + 2] * inv2[1], o[c][4 * n0 + 3] * inv2[1]),
                                      pk(o[c][4 * n0 + 4] * inv2[0], o[c][4 * n0 + 5] * inv2[0]),
                                      pk(o[c][4 * n0 + 6] * inv2[1], o[c][4 * n0 + 7] * inv2[1])};
              stmatrix_x4(mrow + c * Tr::kBlockM * 64 + ((n0 + j / 2) ^ q) * 8, r4);
            }
        }
      }
#pragma unroll
      for (int i = 0; i < 2 && !(kStsm && tma_o); ++i) {
        float lse;
        const float inv = row_inv(i, lse);
        const int r = wrow0 + gid + 8 * i;
        const int64_t row = cta.q0 + cta.row0 + r;
        T* out = static_cast<T*>(p.o) + row * p.o_row_stride + static_cast<int64_t>(h) * p.o_head_stride;
        if (tma_o) {
          // Row r - 64·cw of the warpgroup's box; its 16-byte chunk n at n ^ (r % 8) (r % 8 = gid).
          T* orow = o_wg + (r - 64 * cw) * 64 + tig * 2;
#pragma unroll
          for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
            for (int n = 0; n < 8; ++n)
              *reinterpret_cast<uint32_t*>(orow + c * Tr::kBlockM * 64 + (n ^ gid) * 8) =
                  pk(o[c][4 * n + 2 * i] * inv, o[c][4 * n + 2 * i + 1] * inv);
        } else if (!o16) {
          if (r < cta.block_rows) {
#pragma unroll
            for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
              for (int n = 0; n < 8; ++n)
                *reinterpret_cast<uint32_t*>(out + c * 64 + n * 8 + tig * 2) =
                    pk(o[c][4 * n + 2 * i] * inv, o[c][4 * n + 2 * i + 1] * inv);
          }
        } else {
#pragma unroll
        for (int c = 0; c < Tr::kBlocks; ++c)
#pragma unroll
          for (int g = 0; g < 2; ++g) {
            uint32_t w4[4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
              const int n = 4 * g + j;
              w4[j] = pk(o[c][4 * n + 2 * i] * inv, o[c][4 * n + 2 * i + 1] * inv);
            }
            quad_transpose(w4, tig);  // all lanes: the shuffles take the whole warp
            if (r < cta.block_rows)
              *reinterpret_cast<uint4*>(out + c * 64 + (4 * g + tig) * 8) = make_uint4(w4[0], w4[1], w4[2], w4[3]);
          }
        }
        if (p.lse != nullptr && tig == 0 && r < cta.block_rows) p.lse[row * p.num_heads + h] = lse;
      }
      stamp_fine(2);
      if (tma_o) {
        fence_proxy_async();  // the buffer's writes, for the TMA's (async proxy) reads
        named_barrier_sync(bar_o, 128);
        stamp_fine(3);
        if (wt == 0) {
          const int row0 = static_cast<int>(cta.q0 + cta.row0) + 64 * cw;
#pragma unroll
          for (int c = 0; c < Tr::kBlocks; ++c) tma_store_3d(&maps.o, o_wg + c * Tr::kBlockM * 64, c * 64, h, row0);
          bulk_commit_group();
        }
      }
      if (hold_q) {
        q_held = q_st;
        holding = true;
      }
      stamp(7);
      ++traced;
    }
  };
  // With the proxy fence where the stages come by cp.async (pages) only: the fence's asm (a
  // memory clobber) cost the packed rows 1.5-3% (session 21 call 4).
  walk(std::bool_constant<kPaged>{});
  // The last O stores done before the CTA (and its shared memory) ends.
  if (Tr::kTmaO && maps.o_tma != 0 && ctid % 128 == 0) bulk_wait<0>();
  if (ctid == 0) trace.exit(traced);
#else
  __trap();  // not sm_90a code: the host launches this kernel only where it runs sm_90a code
#endif
}

// grid_ctas: the persistent grid's SMs (INT_MAX: one CTA an item; fewer CTAs when there are fewer
// work items). kTransform:
// as the kernel's (prefill_ws_split_logits).
template <int kHeadDim, int kRows, int kKeyTile, typename T, WsKv kKv, bool kTransform = true>
cudaError_t launch_prefill_sm90_ws(const PrefillParams& p, const PrefillTmaMaps& maps, int grid_ctas,
                                   cudaStream_t stream) {
  using Tr = WsTraitsOf<kHeadDim, kRows, kKeyTile, T, kKv>;
  auto kernel = prefill_sm90_ws_kernel<kHeadDim, kRows, kKeyTile, T, kKv, kTransform>;
  if (p.paged != (kKv != WsKv::kPacked)) return cudaErrorInvalidValue;  // the instance for the call's K/V
  if ((kKv == WsKv::kPageBoxes) != (maps.page_boxes != 0)) return cudaErrorInvalidValue;  // ... its maps
  if (!kTransform && logit_transform(p.mask)) return cudaErrorInvalidValue;  // ... and for its logits
  cudaError_t err = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Tr::kSmemBytes);
  if (err != cudaSuccess) return err;
  const int64_t items = static_cast<int64_t>((p.max_seqlen_q + Tr::kBlockM - 1) / Tr::kBlockM) * p.num_heads * p.batch;
  // A persistent grid (grid_ctas below INT_MAX) holds kCtasPerSm CTAs an SM.
  const int64_t ctas = grid_ctas == INT_MAX ? items : static_cast<int64_t>(grid_ctas) * Tr::kCtasPerSm;
  const int grid = static_cast<int>(std::min<int64_t>({items, ctas, INT_MAX}));
  if (grid <= 0) return cudaSuccess;
  kernel<<<grid, Tr::kThreads, Tr::kSmemBytes, stream>>>(p, maps);
  return cudaGetLastError();
}

}  // namespace flashserve::cuda
