#include "attention/cuda/prefill_cuda.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>
#ifdef FLASHSERVE_PREFILL_TRACE
#include <cstdio>
#endif

#include <cudaTypedefs.h>

#include "attention/cuda/prefill_kernel.cuh"
#include "attention/cuda/prefill_sm90_ws_kernel.cuh"
#include "attention/dispatch.h"
#include "common/cuda_check.h"
#include "kvcache/page_view_check.h"

namespace flashserve::cuda {

extern template cudaError_t launch_prefill<64, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<64, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<128, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<128, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
// FP8 pages (prefill_hd*_fp8.cu): one instance a head dim for bf16/fp16 calls over e4m3/e5m2.
extern template cudaError_t launch_prefill<64, __half, true>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<128, __half, true>(const PrefillParams&, cudaStream_t);
#if FLASHSERVE_PREFILL_HD256
extern template cudaError_t launch_prefill<256, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill<256, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
#endif
template <int kHeadDim, typename T>
cudaError_t launch_prefill_sm90(const PrefillParams& p, cudaStream_t stream);
extern template cudaError_t launch_prefill_sm90<64, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill_sm90<64, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill_sm90<128, __half>(const PrefillParams&, cudaStream_t);
extern template cudaError_t launch_prefill_sm90<128, __nv_bfloat16>(const PrefillParams&, cudaStream_t);
cudaError_t prefill_sm90_runs_here(bool* runs);
// Each (head dim, tiles, dtype) has an instance for packed K/V and one for pages (WsKv), and at
// the head dims of prefill_ws_split_logits each of those without the logit transform's code and
// with it (TF); elsewhere one with it.
#define FS_WS_INSTANCE(D, M, N, T, TF)                                                                         \
  extern template cudaError_t launch_prefill_sm90_ws<D, M, N, T, WsKv::kPacked, TF>(                          \
      const PrefillParams&, const PrefillTmaMaps&, int, cudaStream_t);                                         \
  extern template cudaError_t launch_prefill_sm90_ws<D, M, N, T, WsKv::kPages, TF>(                           \
      const PrefillParams&, const PrefillTmaMaps&, int, cudaStream_t);
FS_WS_INSTANCE(64, 192, 128, __half, false)
FS_WS_INSTANCE(64, 192, 128, __nv_bfloat16, false)
FS_WS_INSTANCE(64, 192, 128, __half, true)
FS_WS_INSTANCE(64, 192, 128, __nv_bfloat16, true)
FS_WS_INSTANCE(64, 128, 128, __half, false)
FS_WS_INSTANCE(64, 128, 128, __nv_bfloat16, false)
FS_WS_INSTANCE(64, 128, 128, __half, true)
FS_WS_INSTANCE(64, 128, 128, __nv_bfloat16, true)
FS_WS_INSTANCE(64, 64, 128, __half, false)
FS_WS_INSTANCE(64, 64, 128, __nv_bfloat16, false)
FS_WS_INSTANCE(64, 64, 128, __half, true)
FS_WS_INSTANCE(64, 64, 128, __nv_bfloat16, true)
FS_WS_INSTANCE(128, 128, 128, __half, false)
FS_WS_INSTANCE(128, 128, 128, __nv_bfloat16, false)
FS_WS_INSTANCE(128, 128, 128, __half, true)
FS_WS_INSTANCE(128, 128, 128, __nv_bfloat16, true)
FS_WS_INSTANCE(128, 128, 176, __half, false)
FS_WS_INSTANCE(128, 128, 176, __nv_bfloat16, false)
FS_WS_INSTANCE(128, 128, 176, __half, true)
FS_WS_INSTANCE(128, 128, 176, __nv_bfloat16, true)
#if FLASHSERVE_PREFILL_HD256
FS_WS_INSTANCE(256, 128, 80, __half, true)
FS_WS_INSTANCE(256, 128, 80, __nv_bfloat16, true)
#endif
#undef FS_WS_INSTANCE
// TMA page boxes (prefill_cuda.h): 16-bit pages of 128 tokens or more, 128-key tiles, no logit
// transform.
#define FS_WS_BOXES_INSTANCE(D, M, T)                                                                          \
  extern template cudaError_t launch_prefill_sm90_ws<D, M, 128, T, WsKv::kPageBoxes, false>(                  \
      const PrefillParams&, const PrefillTmaMaps&, int, cudaStream_t);
FS_WS_BOXES_INSTANCE(64, 192, __half)
FS_WS_BOXES_INSTANCE(64, 192, __nv_bfloat16)
FS_WS_BOXES_INSTANCE(64, 128, __half)
FS_WS_BOXES_INSTANCE(64, 128, __nv_bfloat16)
FS_WS_BOXES_INSTANCE(64, 64, __half)
FS_WS_BOXES_INSTANCE(64, 64, __nv_bfloat16)
FS_WS_BOXES_INSTANCE(128, 128, __half)
FS_WS_BOXES_INSTANCE(128, 128, __nv_bfloat16)
#undef FS_WS_BOXES_INSTANCE
// FP8 pages, d 128, bf16/fp16 calls: e4m3 by the copy path (prefill_sm90_ws_hd128_fp8.cu), e5m2 by
// the register path (prefill_sm90_ws_hd128_fp8_reg.cu; the kernel's kFp8RegProducerRegs says why).
extern template cudaError_t launch_prefill_sm90_ws<128, 128, 128, __half, WsKv::kFp8Pages>(const PrefillParams&,
                                                                                           const PrefillTmaMaps&, int,
                                                                                           cudaStream_t);
extern template cudaError_t launch_prefill_sm90_ws<128, 128, 128, __half, WsKv::kFp8RegPages>(const PrefillParams&,
                                                                                              const PrefillTmaMaps&,
                                                                                              int, cudaStream_t);

#if FLASHSERVE_PREFILL_HD256
constexpr bool kHeadDim256 = true;
#else
constexpr bool kHeadDim256 = false;
#endif

// The instances above, for dispatch_head_dim_dtype: mma.sync and v3 at d 64 and 128 (mma.sync's
// d 256 is prefill_mma_hd256's), the warp-specialized kernel at d 64, 128 and (a build option)
// 256, its tiles those of prefill_ws_tiles.
using Dtypes16 = DTypes<DType::kFloat16, DType::kBFloat16>;
using Built64x128 = KernelInstances<HeadDims<64, 128>, Dtypes16>;
#if FLASHSERVE_PREFILL_HD256
using BuiltWs = KernelInstances<HeadDims<64, 128, 256>, Dtypes16>;
#else
using BuiltWs = KernelInstances<HeadDims<64, 128>, Dtypes16>;
#endif

namespace {

// Whether the A/B switch `name` (an environment variable, read at every call) is "0": off, where
// the switch is on unless so.
bool env_zero(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::strcmp(value, "0") == 0;
}

bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

enum class Kernel { kMma, kWgmma, kWs };

// The ws kernel's producer loads paged K/V by the row gather (WsRowGather: 8 threads a key row,
// the rows' offsets in the pool staged in shared memory a tile ahead), but for 16-bit pages of
// 128 tokens or more where ws_page_boxes (TMA page boxes). For pages of 16 and 64:
// same-process A/B on the H200 (bench/history/prefill.md "prefill v4.7"), d 128, 2k over 30k,
// causal: 16-token pages 585 TFLOP/s against TMA page boxes 402, the older gather 338 and v3's
// cp.async 447; 64-token pages 579 against boxes 444; packed 618. (Both other paths went in
// v4.23, session 33.) It stages a row's offset in the pool in 16-byte units in 32 bits, so
// pools below 64 GiB (a layer's pool: a million 64 KiB blocks); larger ones take v3's kernel.
bool ws_row_gather(const PrefillParams& p) {
  const int64_t elem = dtype_size(p.pages.dtype);
  const int64_t last_row = (static_cast<int64_t>(p.pages.num_blocks) - 1) * p.pages.block_stride * elem +
                           (static_cast<int64_t>(p.pages.block_size) - 1) * p.pages.token_stride * elem;
  return last_row / 16 <= UINT32_MAX;
}

// TMA page boxes (prefill_cuda.h): 16-bit pages of 128 tokens or more at d 64 and 128 without a
// logit transform, whose tiles the WsKv::kPageBoxes instances take as the pages' column boxes (the
// row gather for a sequence's last partial tile), and such calls the 128-key tile (ws_tile_form).
// FLASHSERVE_PREFILL_WS_PAGE_BOXES=0 in the environment keeps such pages on the row gather and
// its tile rule (A/B, cross-checks), read at every call.
// The smallest pages the boxes take: a whole 128-key tile a page. (Tiles of 16-64-token pages whose
// ids run on, as one box of 128 / block_size pages, did not pay: bench/history/prefill.md
// "Session 46".)
constexpr int kBoxMinBlock = 128;
bool ws_page_boxes(const PrefillParams& p) {
  if (!p.paged || p.pages.block_size < kBoxMinBlock || is_fp8(p.pages.dtype) || (p.head_dim != 64 && p.head_dim != 128) ||
      logit_transform(p.mask))
    return false;
  return !env_zero("FLASHSERVE_PREFILL_WS_PAGE_BOXES");
}

// Whether the warp-specialized kernel is the default (else v3's wgmma kernel), from same-run
// measurements (bench/history/prefill.md, "prefill v4.0" to "prefill v4.4"), bf16 TFLOP/s:
//  - head_dim 256: always (there is no v3 kernel, only mma.sync);
//  - packed at d 128: 1.1-1.5× v3;
//  - packed at d 64: 1×16k 456/450 causal against v3's 401/393, 4×4k 419/365 against 391/353
//    (v4.4, 192-row tiles); at 16×1k since v4.28 (the instances without the transform's code and
//    128-row tiles for short causal calls, 64-row ones since v4.37: ws_tile_form) 354/260 against
//    v3's 338/252 (session 39 call 2, H100, 6 passes; v3 had won there before: 342/249 against
//    314/194);
//  - paged, by the row gather: at d 128 whatever the pages, 2k over 30k in
//    16-token pages 585 against v3's 447, 4×4k causal 489-496 against 355-375; at d 64 where the
//    sequences are long (queries of 2k or more), 4×4k causal in 16-token pages 339 against 320;
//    without a causal mask, 16×1k in 16-token pages 322 against 309 (192 rows); causal and
//    short where the caller's total_k hint says so (the 128-row tile: ws_tile_form), 16×1k 239
//    against 236 (session 39 call 3, H100, 6 passes); causal, short queries and no hint (the keys
//    may be a long prefix's): v3 (192 rows there: 183).
bool ws_d64_short_causal(const PrefillParams& p);  // (below, with the tiles' other choices)
bool ws_by_default(const PrefillParams& p) {
  if (p.head_dim == 256) return true;
  if (p.paged) return p.head_dim != 64 || p.max_seqlen_q >= 2048 || !p.mask.causal || ws_d64_short_causal(p);
  return true;
}

// Which kernel: on a device that runs this build's sm_90a code, the warp-specialized one (TMA,
// wgmma; head_dim 64, 128 and 256; the default where ws_by_default) or, where its tensor
// maps cannot describe the tensors, the wgmma one of v3 (d 256: mma.sync); elsewhere mma.sync. FLASHSERVE_PREFILL_KERNEL=mma forces the mma.sync
// kernel, =wgmma the v3 wgmma kernel, =ws the warp-specialized one (cross-checks, A/B
// benchmarks; a forced sm_90a kernel is an error where the device cannot run it; =ws falls back
// to v3 where the maps cannot describe the tensors). Read at every call.
Status pick_kernel(const PrefillParams& p, Kernel* kernel) {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cached[kMaxDevices];  // 0 unknown, 1 no, 2 yes
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) {
    (void)cudaGetLastError();
    device = -1;
  }
  int known = device >= 0 ? cached[device].load(std::memory_order_relaxed) : 0;
  if (known == 0) {
    bool runs = false;
    const cudaError_t err = prefill_sm90_runs_here(&runs);
    if (err != cudaSuccess) return cuda_status(err, "prefill: kernel attributes");  // not cached: asked again
    known = runs ? 2 : 1;
    if (device >= 0) cached[device].store(known, std::memory_order_relaxed);
  }
  const char* force = std::getenv("FLASHSERVE_PREFILL_KERNEL");
  if (force != nullptr && std::strcmp(force, "mma") == 0) {
    *kernel = Kernel::kMma;
  } else if (force != nullptr && (std::strcmp(force, "wgmma") == 0 || std::strcmp(force, "ws") == 0)) {
    if (known != 2)
      return unsupported(std::string("prefill: FLASHSERVE_PREFILL_KERNEL=") + force +
                         ", but this device does not run the sm_90a kernels");
    *kernel = std::strcmp(force, "ws") == 0 ? Kernel::kWs : Kernel::kWgmma;
  } else {
    *kernel = known != 2 ? Kernel::kMma : ws_by_default(p) ? Kernel::kWs : Kernel::kWgmma;
  }
  return Status::Ok();
}

// cuTensorMapEncodeTiled from the driver (no link against libcuda), asked once; null if absent.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// A 16-bit tensor of `rank` dims (innermost first; byte strides of the outer ones) as a map with
// boxes `box`, 128-byte swizzled (the kernel's column blocks of 64). False where the driver
// cannot encode it.
bool encode_tiled(CUtensorMap* map, DType dtype, int rank, const void* base, const cuuint64_t* dims,
                  const cuuint64_t* strides, const cuuint32_t* box) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr) return false;
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  const CUtensorMapDataType type =
      dtype == DType::kFloat16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  return encode(map, type, rank, const_cast<void*>(base), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A [rows, heads, head_dim] tensor (element strides) as a 3-d map with boxes of 64 columns × 1
// head × box_rows rows. False where the map cannot describe it (then the caller takes another
// kernel).
bool encode_rows(CUtensorMap* map, const PrefillParams& p, const void* base, int64_t heads, int64_t rows,
                 int64_t row_stride, int64_t head_stride, int box_rows) {
  if (rows <= 0 || rows > INT32_MAX || heads <= 0) return false;
  const int64_t elem = 2;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(heads),
                              static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(head_stride * elem), static_cast<cuuint64_t>(row_stride * elem)};
  const cuuint32_t box[3] = {64, 1, static_cast<cuuint32_t>(box_rows)};
  return encode_tiled(map, p.dtype, 3, base, dims, strides, box);
}

// The page pool as two 4-d maps, K and V: [blocks, kv heads, block_size, head_dim] (element
// strides from the view), boxes of 64 columns x 128 rows of one (block, kv head), for the page
// boxes (prefill_cuda.h): 16-bit pages of 128 tokens or more. Ids past num_blocks or negative
// read as zeros (outside the tensor). False: the row gather takes every tile.
bool encode_pages(PrefillTmaMaps* maps, const PrefillParams& p) {
  const KVPageView& pv = p.pages;
  if (is_fp8(pv.dtype) || dtype_size(pv.dtype) != 2 || pv.block_size < kBoxMinBlock || pv.num_blocks <= 0 ||
      p.num_kv_heads <= 0)
    return false;
  const int64_t elem = 2;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(p.head_dim), static_cast<cuuint64_t>(pv.block_size),
                              static_cast<cuuint64_t>(p.num_kv_heads), static_cast<cuuint64_t>(pv.num_blocks)};
  const cuuint64_t strides[3] = {static_cast<cuuint64_t>(pv.token_stride * elem), static_cast<cuuint64_t>(pv.head_stride * elem),
                                 static_cast<cuuint64_t>(pv.block_stride * elem)};
  const cuuint32_t box[4] = {64, 128, 1, 1};
  return encode_tiled(&maps->k, p.dtype, 4, pv.k_pages, dims, strides, box) &&
         encode_tiled(&maps->v, p.dtype, 4, pv.v_pages, dims, strides, box);
}

// The form of the call's tile (prefill_ws_tiles' form: the head dim's first, its second, or d 64's
// third, kWsPair).
// d 128: the wide key tile (176 keys, else 128), without a window (a window sees fewer keys), and
// only where sequences have on average 8k keys or more (packed, causal or not; with fewer items an
// SM, the 128-key tile's finer grain balances better, and at causal rows the diagonal costs a
// 176-key tile more) or, in 16-bit pages without a causal mask, 2k or more (the row gather of a
// 176-key tile pays there). Packed: by total_k. Paged: by the caller's total_k hint (the keys of
// all sequences; 0, not known on the host: 128 keys, but for the max_q^2 rule below). Same-run
// A/B, bf16 TFLOP/s, 128 keys against 176, both forced (bench/history/prefill.md "Session 46",
// call 3, H200, v4.34, 10 passes, paired medians; 176 had been the non-causal tile from 2k keys
// since session 18, before the packed 128-key tile's third stage, v4.29, and its half tile,
// v4.32): 4x4k +2.1%, 8x2k +3.2%, the skewed batch +1.0%, 1x16k -1.9%, 1x16k causal -0.5%, 2k over
// 30k causal -2.8%, 4x4k in 16-token pages -0.9%, 1x16k causal in 16-token pages -3.3%, 4x4k causal
// +4.0%, 8x2k causal +8.6%, the skewed batch causal +4.2%, 16x1k +4.5% (2x8k not measured).
// d 64: the short rows, without a window, where the mask is causal and sequences have on average
// fewer than 8k keys (total_k; paged without the hint: long), or where it is not and no sequence
// has more than 1024 queries (192-row tiles pad 1k queries to 1152 rows, 512 to 576), take 64
// rows (kWsPair) where K/V are packed and 128 where they are paged; the others 192 rows. The
// measurements at prefill_ws_tiles and kWsPair.
// FLASHSERVE_PREFILL_WS_BLOCK_N=128 or 176 forces the choice at d 128,
// FLASHSERVE_PREFILL_WS_BLOCK_M=64, 128 or 192 at d 64 (A/B benchmarks, cross-checks), read at every
// call.
// (d 64's rule without the override: ws_by_default reads it too, so that forcing the tile does not
// move a call between kernels.)
bool has_window(const MaskParams& m) { return m.window_left >= 0 || m.window_right >= 0; }
// Whether p's sequences have q lengths that differ (a varlen batch, not rows of one length).
bool ragged_q(const PrefillParams& p) { return p.total_q != static_cast<int64_t>(p.batch) * p.max_seqlen_q; }
bool ws_d64_short_causal(const PrefillParams& p) {
  return p.mask.causal && !has_window(p.mask) && p.total_k > 0 && p.total_k < 8192ll * std::max(1, p.batch);
}
bool ws_d128_wide_keys(const PrefillParams& p) {
  if (p.head_dim != 128) return false;
  if (p.paged && is_fp8(p.pages.dtype)) return false;  // the FP8 instance: 128-key tiles (shared memory)
  const char* force = std::getenv("FLASHSERVE_PREFILL_WS_BLOCK_N");
  if (force != nullptr && std::strcmp(force, "176") == 0) return true;
  if (force != nullptr && std::strcmp(force, "128") == 0) return false;
  if (has_window(p.mask)) return false;
  if (ws_page_boxes(p)) return false;  // 128-key tiles for the page boxes
  const bool gather = p.paged && !p.mask.causal;  // (FP8 and boxed pages returned above)
  if (p.total_k >= (gather ? 2048ll : 8192ll) * std::max(1, p.batch)) return true;
  // Without a causal mask a sequence's work grows with the square of its length, so a batch
  // whose longest sequence holds most of the work (one 8k prompt among 63 short ones) runs the
  // wide tile though the mean is short: max_q^2 / total_q, a lower bound on the work-weighted
  // mean q length, at least 2048 (session 32: 176 keys 545 against 128's 509 TFLOP/s there,
  // packed). Packed, 128 keys won there since (session 46 call 3: +1.0%); at pages it is kept,
  // unmeasured since.
  const int64_t max_q = p.max_seqlen_q;
  return gather && max_q * max_q >= 2048ll * std::max<int64_t>(1, p.total_q);
}
int ws_tile_form(const PrefillParams& p) {
  if (p.head_dim == 64) {
    const char* force = std::getenv("FLASHSERVE_PREFILL_WS_BLOCK_M");
    if (force != nullptr && std::strcmp(force, "64") == 0) return kWsPair;
    if (force != nullptr && std::strcmp(force, "128") == 0) return kWsSecond;
    if (force != nullptr && std::strcmp(force, "192") == 0) return kWsFirst;
    const bool short_rows =
        ws_d64_short_causal(p) || (!p.mask.causal && !has_window(p.mask) && p.max_seqlen_q <= 1024);
    return !short_rows ? kWsFirst : p.paged ? kWsSecond : kWsPair;
  }
  return ws_d128_wide_keys(p) ? kWsSecond : kWsFirst;
}

// The work order's section for p (ws_section_pairs has the rule and its measurements): keys by
// the mean a sequence (packed; paged: the most a block table holds, so sections are never too
// large), a kv head shared by its query heads. Overrides, read at every call (A/B benchmarks):
// FLASHSERVE_PREFILL_WS_SECTION=N pairs (0: all, session 11's order), FLASHSERVE_PREFILL_WS_L2_MB=M
// the budget in MiB (causal and not).
int ws_section(const PrefillParams& p) {
  const int64_t pairs = std::max<int64_t>(1, static_cast<int64_t>(p.num_heads) * p.batch);
  if (const char* force = std::getenv("FLASHSERVE_PREFILL_WS_SECTION")) {
    const long n = std::strtol(force, nullptr, 10);
    return static_cast<int>(n <= 0 || n > pairs ? pairs : n);
  }
  const char* mb = std::getenv("FLASHSERVE_PREFILL_WS_L2_MB");
  const int64_t budget = mb != nullptr ? std::max(1l, std::strtol(mb, nullptr, 10)) << 20 : kWsSectionBytes;
  const int64_t keys = p.paged ? std::max<int64_t>(p.max_seqlen_q, p.pages.block_table_stride * p.pages.block_size)
                               : std::max<int64_t>(1, p.total_k / std::max(1, p.batch));
  return ws_section_pairs(pairs, keys, p.head_dim, p.num_heads / std::max(1, p.num_kv_heads),
                          p.mask.causal || mb != nullptr, budget);
}

// The warp-specialized kernel's maps for this call and its tiles: Q, and K and V when packed
// (paged K/V come by the row gather; pages of 128 tokens or more by TMA page boxes where
// ws_page_boxes, the tile's 128 keys and the pool's maps encode: then K and V are the pool's maps
// and maps->page_boxes is set). False where the maps cannot describe the tensors, or
// the row gather cannot reach the pool (ws_row_gather).
bool make_tma_maps(const PrefillParams& p, const PrefillWsTiles& tiles, PrefillTmaMaps* maps) {
  std::memset(maps, 0, sizeof(*maps));
  maps->section = ws_section(p);
  // Q evict_first in L2, K and V at normal priority (2; prefill v4.36 had 3, K and V evict_last
  // too). Beside v4.36's 8 MB causal sections the hints read level: 2 within 1% of 3 on every
  // causal row, 0 within 2% (bench/history/prefill.md "Session 51", call 1, H100, 8 passes, paired medians);
  // 2 leaves no evict_last lines in the L2 for the kernels after prefill (a persisting set-aside
  // would hold them). FLASHSERVE_PREFILL_WS_L2_HINTS=N, read at every call (A/B): N 0-3, bit 0
  // the K/V hint, bit 1 Q's, 0 none; anything else: the default.
  const char* hints = std::getenv("FLASHSERVE_PREFILL_WS_L2_HINTS");
  maps->l2_hints = hints != nullptr && hints[0] >= '0' && hints[0] <= '3' && hints[1] == '\0' ? hints[0] - '0' : 2;
  // q lengths that differ: a persistent grid walks only the q tiles that exist (WsWorkOrder).
  // FLASHSERVE_PREFILL_WS_VARLEN=0 keeps the grid order (A/B), read at every call.
  maps->varlen = ragged_q(p) && !env_zero("FLASHSERVE_PREFILL_WS_VARLEN");
  if (!encode_rows(&maps->q, p, p.q, p.num_heads, p.total_q, p.q_row_stride, p.q_head_stride, tiles.block_m))
    return false;
  // O by TMA stores where the instance has the buffer (PrefillWsTraits::kTmaO) and the map encodes
  // (o 16-byte aligned, strides of 16 bytes); else from registers. FLASHSERVE_PREFILL_WS_TMA_O=0
  // stores from registers (A/B), read at every call.
  const bool o_tma = !env_zero("FLASHSERVE_PREFILL_WS_TMA_O") &&
                     encode_rows(&maps->o, p, p.o, p.num_heads, p.total_q, p.o_row_stride, p.o_head_stride, 64);
  maps->o_tma = o_tma ? 1 : 0;
  // FP8 pages: FLASHSERVE_PREFILL_WS_FP8_DIAG=1 (no conversion), 2 (no copies of the codes) or 3
  // (e4m3 converted as e5m2: no F2FP), a bench-only diagnosis of what sets the FP8 producer's
  // pace (PrefillTmaMaps::fp8_diag); the outputs are wrong. The copy path reads it; the register
  // path only in a build with -DFLASHSERVE_PREFILL_WS_FP8_REG_LEAN=0 (kFp8RegLean).
  if (const char* diag = std::getenv("FLASHSERVE_PREFILL_WS_FP8_DIAG"); diag != nullptr && p.paged && is_fp8(p.pages.dtype)) {
    const int d = std::atoi(diag);
    maps->fp8_diag = d >= 1 && d <= 3 ? d : 0;
  }
  // Q's second slot in O's buffer (PrefillWsTraits::kQSlots); FLASHSERVE_PREFILL_WS_Q_SLOTS=1 keeps
  // one Q slot and the buffer apart (A/B against v4.17's walk), read at every call.
  const char* q_slots = std::getenv("FLASHSERVE_PREFILL_WS_Q_SLOTS");
  maps->q_slots = q_slots != nullptr && std::strcmp(q_slots, "1") == 0 ? 1 : 2;
  // The consumers' plain tile run (PrefillTmaMaps::plain, prefill v4.20); FLASHSERVE_PREFILL_WS_PLAIN=0
  // takes every tile through the general loop (A/B); read at every call.
  maps->plain = env_zero("FLASHSERVE_PREFILL_WS_PLAIN") ? 0 : 1;
  if (p.paged) {
    if (tiles.block_n == 128 && ws_page_boxes(p)) maps->page_boxes = encode_pages(maps, p) ? 1 : 0;
    return ws_row_gather(p);
  }
  const int kv_box = FLASHSERVE_PREFILL_WS_KV_BOX_ROWS > 0 ? FLASHSERVE_PREFILL_WS_KV_BOX_ROWS : tiles.block_n;
  return encode_rows(&maps->k, p, p.k, p.num_kv_heads, p.total_k, p.k_row_stride, p.k_head_stride, kv_box) &&
         encode_rows(&maps->v, p, p.v, p.num_kv_heads, p.total_k, p.v_row_stride, p.v_head_stride, kv_box);
}

// d 256 by the mma.sync kernel, which needs more shared memory than some devices allow.
Status prefill_mma_hd256(const PrefillParams& p, cudaStream_t stream) {
#if FLASHSERVE_PREFILL_HD256
  int device = 0, optin = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (err != cudaSuccess) return cuda_status(err, "prefill: device attributes");
  constexpr int kNeed = PrefillTraits<256, __half>::kSmemBytes;
  if (optin < kNeed)
    return unsupported("prefill: head_dim 256 needs " + std::to_string(kNeed) + " bytes of shared memory per block; " +
                       "this device allows " + std::to_string(optin));
  FS_RETURN_IF_ERROR(dispatch_dtype<Dtypes16>("prefill (head_dim 256)", p.dtype, [&](auto dt) {
    err = launch_prefill<256, cuda_storage_t<decltype(dt)::value>>(p, stream);
  }));
  return cuda_status(err, "prefill kernel (head_dim 256)");
#else
  (void)p;
  (void)stream;
  return unsupported("prefill: head_dim 256 on CUDA needs a build with -DFLASHSERVE_PREFILL_HD256=ON");
#endif
}

// Counters for captured launches (ws_sched_pair under stream capture, unless
// FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=0; ws_captured_sched): a pair of words a captured
// launch, its own for as long as the graph it was captured into, or an executable graph made from
// it, holds it: a CUDA user object on the capturing graph gives the pair back to the free list
// when the last of those goes, after its launches have finished (its destructor runs later, on a
// driver thread, and may not call CUDA, so it only takes the mutex; every CUDA call here is made
// outside it). A replay leaves the pair at
// zero as an eager launch does (the kernel's last CTA), so the next replay starts from zero;
// replays of one executable graph never overlap (CUDA orders them), so a pair is never walked by
// two launches at once. (Executable graphs instantiated from one captured graph, its clones, one
// graph twice as child nodes of another, an executable graph updated from it
// (cudaGraphExecUpdate), or kernel nodes whose parameters are copied by hand into another graph
// share its pairs and must not run at the same time: as any captured workspace; the last escape
// the reference count too.) Pairs come in zeroed chunks of kChunk, allocated and zeroed on a
// private stream in the relaxed capture mode. They live until the process ends: do not
// cudaDeviceReset a device that prefill has run on (the free list would hand out freed memory).
class CapturedPairs {
 public:
  static constexpr int kMaxDevices = 64, kChunk = 1024;
  static CapturedPairs& get() {
    static CapturedPairs* pairs = new CapturedPairs;  // (never destroyed: user objects may outlive main)
    return *pairs;
  }
  // A pair for a launch being captured on `stream` (capture status active) on `device`, tied to the
  // capturing graph; null on any error (the caller then walks statically). In the relaxed capture
  // mode (the caller's), so that a chunk's allocation does not break another capture.
  unsigned* take(cudaStream_t stream, int device) {
    cudaGraph_t graph = nullptr;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    if (cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph) != cudaSuccess ||
        status != cudaStreamCaptureStatusActive || graph == nullptr)
      return nullptr;
    unsigned* pair = pop(device);
    if (pair == nullptr) pair = grow(device);
    if (pair == nullptr) return nullptr;
    auto* back = new (std::nothrow) Back{this, device, pair};
    cudaUserObject_t object = nullptr;
    if (back == nullptr ||
        cudaUserObjectCreate(&object, back, &Back::give_back, 1, cudaUserObjectNoDestructorSync) != cudaSuccess) {
      delete back;
      push(device, pair);
      return nullptr;
    }
    if (cudaGraphRetainUserObject(graph, object, 1, cudaGraphUserObjectMove) != cudaSuccess) {
      cudaUserObjectRelease(object, 1);  // (its destructor gives the pair back)
      return nullptr;
    }
    return pair;
  }
  // Pairs handed out and not given back, on `device` (tests).
  int in_use(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    return allocated_[device] - static_cast<int>(free_[device].size());
  }

 private:
  struct Back {
    CapturedPairs* owner;
    int device;
    unsigned* pair;
    static void CUDART_CB give_back(void* p) {
      const Back* b = static_cast<Back*>(p);
      b->owner->push(b->device, b->pair);
      delete b;
    }
  };
  unsigned* pop(int device) {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_[device].empty()) return nullptr;
    unsigned* pair = free_[device].back();
    free_[device].pop_back();
    return pair;
  }
  void push(int device, unsigned* pair) {
    std::lock_guard<std::mutex> lock(mu_);
    free_[device].push_back(pair);
  }
  // A new chunk's first pair, the others into the free list (null on an error); the pair taken
  // under the same lock, so that another thread cannot take the whole chunk first.
  unsigned* grow(int device) {  // (in the relaxed capture mode: take's caller)
    unsigned* buf = nullptr;
    cudaStream_t zero = nullptr;
    bool ok = cudaMalloc(&buf, sizeof(unsigned) * 2 * kChunk) == cudaSuccess &&
              cudaStreamCreateWithFlags(&zero, cudaStreamNonBlocking) == cudaSuccess &&
              cudaMemsetAsync(buf, 0, sizeof(unsigned) * 2 * kChunk, zero) == cudaSuccess &&
              cudaStreamSynchronize(zero) == cudaSuccess;
    if (zero != nullptr) ok = cudaStreamDestroy(zero) == cudaSuccess && ok;
    if (!ok) {
      if (buf != nullptr) cudaFree(buf);
      (void)cudaGetLastError();
      return nullptr;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      try {  // (room for every pair of the device up front: the destructor's push never allocates)
        free_[device].reserve(static_cast<size_t>(allocated_[device]) + kChunk);
        for (int i = kChunk - 1; i >= 1; --i) free_[device].push_back(buf + 2 * i);
        allocated_[device] += kChunk;
        return buf;
      } catch (const std::bad_alloc&) {
      }
    }
    cudaFree(buf);
    return nullptr;
  }
  std::mutex mu_;
  std::vector<unsigned*> free_[kMaxDevices];
  int allocated_[kMaxDevices] = {};
};

// Whether a captured launch takes counters of its own (CapturedPairs) and so the dynamic walk:
// yes (prefill v4.41, session 57; bench/NOTES.md has the numbers) unless
// FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=0 (A/B: v4.40's static walk), read at every call.
bool ws_captured_sched() { return !env_zero("FLASHSERVE_PREFILL_WS_CAPTURED_SCHED"); }

// The dynamic walk's counters (PrefillTmaMaps::sched) for a launch on `stream`: a pair of words of
// one zeroed allocation a device, handed out round robin. Each launch leaves its pair at zero
// (the kernel's last CTA), and a pair comes back 4096 launches later: the bound is that fewer
// than 4096 prefill launches of a device are queued or running at once (over all
// streams; launches on one stream run one after another). While the stream is being captured
// into a graph, where a replay could run beside a later launch that took the same pair: a pair of
// the graph's own (CapturedPairs) where ws_captured_sched, else null (a persistent grid then walks
// statically). Null too where FLASHSERVE_PREFILL_WS_SCHED=static (A/B) or on any error. The pool
// is made on a device's first call and zeroed on the caller's stream (ordered before the launch
// whatever the stream's flags), in the relaxed capture mode (another thread's capture is not
// disturbed).
unsigned* ws_sched_pair(cudaStream_t stream) {
  constexpr int kMaxDevices = CapturedPairs::kMaxDevices, kPairs = 4096;
  const char* force = std::getenv("FLASHSERVE_PREFILL_WS_SCHED");
  if (force != nullptr && std::strcmp(force, "static") == 0) return nullptr;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  int device = 0;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess || cudaGetDevice(&device) != cudaSuccess || device < 0 ||
      device >= kMaxDevices) {
    (void)cudaGetLastError();
    return nullptr;
  }
  if (capture != cudaStreamCaptureStatusNone) {
    if (capture != cudaStreamCaptureStatusActive || !ws_captured_sched()) return nullptr;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) {  // (take's calls would break the capture)
      (void)cudaGetLastError();
      return nullptr;
    }
    unsigned* pair = CapturedPairs::get().take(stream, device);
    if (cudaThreadExchangeStreamCaptureMode(&mode) != cudaSuccess) pair = nullptr;  // (left to its graph)
    (void)cudaGetLastError();
    return pair;
  }
  static std::mutex mu;
  static unsigned* pairs[kMaxDevices] = {};
  static unsigned next[kMaxDevices] = {};
  std::lock_guard<std::mutex> lock(mu);
  if (pairs[device] == nullptr) {
    unsigned* buf = nullptr;
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    const bool exchanged = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess;
    bool ok = cudaMalloc(&buf, sizeof(unsigned) * 2 * kPairs) == cudaSuccess &&
              cudaMemsetAsync(buf, 0, sizeof(unsigned) * 2 * kPairs, stream) == cudaSuccess &&
              cudaStreamSynchronize(stream) == cudaSuccess;
    if (exchanged) ok = cudaThreadExchangeStreamCaptureMode(&mode) == cudaSuccess && ok;
    if (!ok) {
      if (buf != nullptr) cudaFree(buf);
      (void)cudaGetLastError();
      return nullptr;
    }
    pairs[device] = buf;
  }
  return pairs[device] + 2 * (next[device]++ % kPairs);
}

#ifdef FLASHSERVE_PREFILL_TRACE
// Bench-only (a -DFLASHSERVE_PREFILL_TRACE=ON build): where FLASHSERVE_PREFILL_TRACE names a file,
// the warp-specialized kernel's stamps (WsTrace) of this call go there, overwritten at every call:
// 8 int64 words (magic 'fstrace1', CTAs recorded, words a CTA, block_m, block_n, consumers,
// persistent grid 1/0, causal) and the records. The call then synchronizes its stream.
struct WsTraceDump {
  static constexpr int kCtas = 4096;
  const char* path = nullptr;
  unsigned long long* buf = nullptr;
  explicit WsTraceDump(PrefillTmaMaps* maps, cudaStream_t stream) : path(std::getenv("FLASHSERVE_PREFILL_TRACE")) {
    static unsigned long long* device_buf = nullptr;
    if (path == nullptr || *path == 0) return;
    if (device_buf == nullptr && cudaMalloc(&device_buf, sizeof(unsigned long long) * kCtas * WsTrace::kWords) != cudaSuccess)
      return;
    buf = device_buf;
    (void)cudaMemsetAsync(buf, 0, sizeof(unsigned long long) * kCtas * WsTrace::kWords, stream);
    maps->trace = buf;
    maps->trace_ctas = kCtas;
  }
  void write(cudaStream_t stream, const PrefillWsTiles& tiles, bool persistent, bool causal) const {
    if (buf == nullptr || cudaStreamSynchronize(stream) != cudaSuccess) return;
    std::vector<unsigned long long> host(static_cast<size_t>(kCtas) * WsTrace::kWords);
    if (cudaMemcpy(host.data(), buf, host.size() * sizeof(host[0]), cudaMemcpyDeviceToHost) != cudaSuccess) return;
    const long long head[8] = {0x3165636172747366ll, kCtas, WsTrace::kWords, tiles.block_m, tiles.block_n,
                               tiles.block_m / 64, persistent ? 1 : 0, causal ? 1 : 0};
    if (FILE* out = std::fopen(path, "wb")) {
      std::fwrite(head, sizeof(head), 1, out);
      std::fwrite(host.data(), sizeof(host[0]), host.size(), out);
      std::fclose(out);
    }
  }
};
#endif

// The tile the warp-specialized kernel takes for p (0 x 0 at head dims it does not have).
PrefillWsTiles ws_call_tiles(const PrefillParams& p) {
  if (p.head_dim != 64 && p.head_dim != 128 && p.head_dim != 256) return PrefillWsTiles{0, 0, 0};
  return prefill_ws_tiles(p.head_dim, ws_tile_form(p), p.paged);
}

}  // namespace

int prefill_ws_key_tile(const PrefillParams& p) { return ws_call_tiles(p).block_n; }
int prefill_ws_tile_rows(const PrefillParams& p) { return ws_call_tiles(p).block_m; }

int prefill_ws_captured_pairs_in_use() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= CapturedPairs::kMaxDevices) {
    (void)cudaGetLastError();
    return 0;
  }
  return CapturedPairs::get().in_use(device);
}

bool prefill_ws_page_boxes(const PrefillParams& p) {
  if (!ws_page_boxes(p) || prefill_ws_key_tile(p) != 128) return false;
  PrefillTmaMaps maps{};
  return encode_pages(&maps, p);
}

Status validate_prefill_cuda(const PrefillParams& p) {
  if (p.paged && is_fp8(p.pages.dtype) && p.head_dim != 64 && p.head_dim != 128)
    return unsupported("prefill: " + std::string(dtype_name(p.pages.dtype)) +
                       " pages on CUDA need head_dim 64 or 128, got " + std::to_string(p.head_dim));
  if (p.head_dim == 256 && !kHeadDim256)
    return unsupported("prefill: head_dim 256 on CUDA needs a build with -DFLASHSERVE_PREFILL_HD256=ON");
  // What the build has (the warp-specialized instances cover every head dim and dtype built).
  FS_RETURN_IF_ERROR(check_built<BuiltWs>("prefill on CUDA", p.head_dim, p.dtype));
  if (p.batch > 65535 || p.num_heads > 65535) return unsupported("prefill: batch and num_heads must be <= 65535 on CUDA");
  if (p.batch > 0 && p.max_seqlen_q <= 0)
    return invalid_argument("prefill: CUDA needs max_seqlen_q > 0 (the longest query length)");
  const int64_t chunk = 16 / dtype_size(p.dtype);  // elements in 16 bytes
  if (!aligned16(p.q) || p.q_row_stride % chunk || p.q_head_stride % chunk)
    return invalid_argument("prefill: CUDA q must be 16-byte aligned, with strides of whole 16-byte chunks");
  if (reinterpret_cast<uintptr_t>(p.o) % 4 || p.o_row_stride % 2 || p.o_head_stride % 2)
    return invalid_argument("prefill: CUDA o must be 4-byte aligned, with even strides");
  if (p.paged) {
    FS_RETURN_IF_ERROR(validate_page_view_cuda("prefill", p.pages, dtype_size(p.pages.dtype)));
  } else if (p.total_k > 0) {
    if (!aligned16(p.k) || !aligned16(p.v) || p.k_row_stride % chunk || p.k_head_stride % chunk ||
        p.v_row_stride % chunk || p.v_head_stride % chunk)
      return invalid_argument("prefill: CUDA k and v must be 16-byte aligned, with strides of whole 16-byte chunks");
  }
  return Status::Ok();
}

Status prefill_cuda(const PrefillParams& p, void* stream_ptr) {
  auto stream = static_cast<cudaStream_t>(stream_ptr);
  cudaError_t err;
  Kernel kernel = Kernel::kMma;
  FS_RETURN_IF_ERROR(pick_kernel(p, &kernel));
  // FP8 pages: at d 128 the warp-specialized kernel's FP8 instance where it runs (by the row
  // gather, the codes converted into its fp16 stages), else the mma.sync kernel's FP8 instances
  // on every device (FLASHSERVE_PREFILL_KERNEL=mma forces them: a cross-check; =wgmma too, v3
  // has none); bench/history/prefill.md, "FP8 pages".
  const bool fp8 = p.paged && is_fp8(p.pages.dtype);
  auto prefill_fp8_mma = [&] {
    err = p.head_dim == 64 ? launch_prefill<64, __half, true>(p, stream) : launch_prefill<128, __half, true>(p, stream);
    return cuda_status(err, "prefill kernel (FP8 pages)");
  };
#if FLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD
  // (The bench switch's ws instances at that head dim have no transform code: such calls take
  // v3, at d 256 mma.sync.)
  if (p.head_dim == FLASHSERVE_PREFILL_WS_NO_TRANSFORM_HD && kernel == Kernel::kWs && logit_transform(p.mask))
    kernel = p.head_dim == 256 ? Kernel::kMma : Kernel::kWgmma;
#endif
  if (fp8 && (kernel != Kernel::kWs || p.head_dim != 128)) return prefill_fp8_mma();
  // d 256: the warp-specialized kernel where sm_90a runs (there is no v3 kernel: =wgmma takes
  // it too), else mma.sync.
  if (p.head_dim == 256 && kernel == Kernel::kWgmma) kernel = Kernel::kWs;
  if (kernel == Kernel::kWs) {
    PrefillTmaMaps maps;
    // A persistent grid of one CTA an SM (two at d 64's 64-row tile) walking the items, or one
    // CTA an item (dispatched by the hardware in WsWorkOrder's order). Packed: persistent by
    // default, by the dynamic walk
    // (ws_sched_pair): it takes the next longest item as a CTA frees up, as the hardware's
    // dispatch does, without a CTA's start and end a item (session 17 call 4, TFLOP/s, against
    // one CTA an item: 16×1k causal 351/361 against 320/318, 4×4k causal 494/496 against 461/475,
    // 16×1k 480/440 against 418/417; the long rows within the spread). A launch captured into a
    // graph (a mixed step's) walks dynamically too, on counters of its graph's own (CapturedPairs;
    // prefill v4.41): within 3% of the eager call where v4.40's static walk lost 1.7-5.3% (the
    // numbers: bench/NOTES.md's prefill section, v4.41). Where the dynamic walk has
    // no counters (FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=0, A/B; a capture whose mode cannot be
    // relaxed for the pairs' allocation; an error): prefill v4.40, the static walk on a
    // persistent grid at every head dim, causal rows by units of a long and a short q tile of one
    // pair (maps.zigzag: WsVarlenOrder's zigzag where the q lengths differ, else, rows of one
    // length or a batch too long for the varlen walk's prefix, WsWorkOrder's zigzag order over
    // the grid order), so that a CTA's units hold about the same key tiles whichever they are: the
    // round robin over the grid order's sawtooth of causal item sizes hands one CTA up to 2.6
    // times another's tiles (16x1k at d 128 on 132 CTAs: 40 to 104, the zigzag 63 to 72), over
    // WsVarlenOrder the busiest CTA 11% more than the mean on a skewed batch (the zigzag 5%;
    // tests/test_prefill_work_order.cc). Captured, against the eager call, v4.40 / v4.39's rule
    // (session 56 calls 1 and 4, H100, 4 and 8 passes, paired; bench/history/prefill.md "Session
    // 56"): d 128 causal 16x1k -6.9 / -19.2%, 8x2k -5.9 / -12.6%, 4x4k -5.2 / -6.6%, 1x16k -4.4 /
    // -5.8%, the skewed batch -2.5 / -7.4%, in 16-token pages -7.4 / -35.0% (traced: the SMs busy
    // 0.94 of the span against 0.63 at the same pace a tile, call 3), the mix of 32 prompts in
    // 16-token pages -1.8 / -13.6%, 200 short prompts -4.3 / -8.7%; d 64 causal 4x4k -3.1 /
    // -6.2%, the skewed batch -3.6 / -5.4%, 1x16k -2.7 / -3.6%, but 16x1k -3.5 / -2.2% (in
    // 16-token pages -4.2 / -2.4%: many short items, which the round robin balanced already).
    // FLASHSERVE_PREFILL_WS_ZIGZAG=0 (the environment, read at every call; A/B) gives v4.39's
    // rule, measured on the round robin (session 53 call 5, H100, 6 passes, paired against the
    // dynamic walk, the rule's launch / one CTA an item; bench/history/prefill.md "Session 53"):
    //  - the static walk where the q lengths differ, packed or paged: one CTA an item launches every
    //    sequence the longest one's q tiles, most of them empty, which the static walk over
    //    WsVarlenOrder never sees (v4.39, session 53 call 6; one CTA an item from calls 1 and 5: the
    //    skewed batch causal d 64 -4.9 / -73.2%, d 128 -8.9 / -65.3%, non-causal -0.4 / -40.9%, in
    //    16-token pages -32.0 / -58.0%, 200 short prompts causal -10.3 / -41.0%, non-causal -0.7 /
    //    -19.4%, the mix of 32 prompts in 16-token pages -10.9 / -19.8%);
    //  - the static walk where the call is not causal: its items alike (d 256 1x16k +1.3 / +0.4%;
    //    d 128 4x4k in 16-token pages -0.5 / -3.6%, in 128-token pages -1.4 / -3.9%; d 64 16x1k -2.1
    //    / -10.8%, in pages -3.6 / -18.1%, 32x512 -4.1 / -18.9%, 64x300 -4.9 / -26.1%, 4x4k -0.1 /
    //    -4.4%; d 128's packed rows of 4k keys or fewer took it before, since session 17);
    //  - causal rows of one length: the static walk at d 64's 64- and 128-row tiles, whose items
    //    are many and short (16x1k -7.8 / -23.1%, in 16-token pages -2.4 / -25.4%, 4x4k in pages
    //    -5.0 / -10.2%, but packed -8.7 / -7.0%), else one CTA an item: the round robin balances
    //    causal items of 128 rows or more badly (call 1's follow-ups, the static walk / one CTA an
    //    item: d 128 16x1k -23.4 / -17.4%, 4x4k -33.1 / -6.6%, 1x16k -29.6 / -0.7%, 8x2k -28.2 /
    //    -10.9%; d 64 1x16k's 192 rows -7.3 / -0.2%; "prefill v4.8").
    // FLASHSERVE_PREFILL_WS_PERSISTENT=1 or 0 forces the grid, FLASHSERVE_PREFILL_WS_SCHED=static
    // takes the dynamic walk's counters away (A/B: as a capture).
    const int form = ws_tile_form(p);
    int sms = INT_MAX;
    const char* persistent = std::getenv("FLASHSERVE_PREFILL_WS_PERSISTENT");
    unsigned* sched = ws_sched_pair(stream);
    const bool zigzag = !env_zero("FLASHSERVE_PREFILL_WS_ZIGZAG");
    const bool walk_static =
        zigzag || ragged_q(p) || !p.mask.causal || (p.head_dim == 64 && form != kWsFirst);
    if (persistent != nullptr ? std::strcmp(persistent, "1") == 0 : sched != nullptr || walk_static) {
      int device = 0;
      err = cudaGetDevice(&device);
      if (err == cudaSuccess) err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
      if (err != cudaSuccess) return cuda_status(err, "prefill: device attributes");
      // FLASHSERVE_PREFILL_WS_GRID=N caps the persistent grid at N SMs' CTAs (N, or 2·N for d 64's
      // kWsPair tile; tests: small problems then walk several items a CTA, the rings' stages and
      // phases carried from item to item).
      if (const char* cap = std::getenv("FLASHSERVE_PREFILL_WS_GRID"); cap != nullptr && std::atoi(cap) > 0)
        sms = std::min(sms, std::atoi(cap));
    }
    if (make_tma_maps(p, prefill_ws_tiles(p.head_dim, form, p.paged), &maps)) {
      err = cudaSuccess;
      if (sms != INT_MAX) maps.sched = sched;
      // (the kernel takes it only where it walks statically: a persistent grid without counters)
      maps.zigzag = zigzag && p.mask.causal;
#ifdef FLASHSERVE_PREFILL_TRACE
      const WsTraceDump dump(&maps, stream);
#endif
      if (fp8) {
        // e5m2 by the register path, e4m3 by the copy path (the kernel's kFp8RegProducerRegs says
        // why); FLASHSERVE_PREFILL_WS_FP8_PATH=reg or copy takes every FP8 pool one way (A/B
        // benchmarks, cross-checks), read at every call.
        bool reg = p.pages.dtype == DType::kFp8E5M2;
        if (const char* path = std::getenv("FLASHSERVE_PREFILL_WS_FP8_PATH"); path != nullptr) {
          if (std::strcmp(path, "reg") == 0) reg = true;
          if (std::strcmp(path, "copy") == 0) reg = false;
        }
        err = reg ? launch_prefill_sm90_ws<128, 128, 128, __half, WsKv::kFp8RegPages>(p, maps, sms, stream)
                  : launch_prefill_sm90_ws<128, 128, 128, __half, WsKv::kFp8Pages>(p, maps, sms, stream);
#ifdef FLASHSERVE_PREFILL_TRACE
        if (err == cudaSuccess) dump.write(stream, prefill_ws_tiles(128, kWsFirst, true), sms != INT_MAX, p.mask.causal);  // 128 x 128
#endif
        return cuda_status(err, "prefill kernel (sm90, warp-specialized, FP8 pages)");
      }
      FS_RETURN_IF_ERROR(dispatch_head_dim_dtype<BuiltWs>("prefill (sm90, warp-specialized)", p.head_dim, p.dtype,
                                                           [&](auto hd, auto dt) {
        constexpr int kD = decltype(hd)::value;
        using T = cuda_storage_t<decltype(dt)::value>;
        // An instance for packed K/V and one for pages (WsKv), of the head dim's tile form
        // (ws_tile_form), and where the head dim has two, the one for the call's logits
        // (prefill_ws_split_logits); pages whose maps the host encoded (maps.page_boxes) by the
        // page boxes' instance of the 128-key tile.
        auto launch = [&](auto form_c) {
          constexpr PrefillWsTiles kT = prefill_ws_tiles(kD, decltype(form_c)::value, false);  // block_m, block_n
          auto run = [&](auto transform_c) {
            constexpr bool kTf = decltype(transform_c)::value;
            err = p.paged
                      ? launch_prefill_sm90_ws<kD, kT.block_m, kT.block_n, T, WsKv::kPages, kTf>(p, maps, sms, stream)
                      : launch_prefill_sm90_ws<kD, kT.block_m, kT.block_n, T, WsKv::kPacked, kTf>(p, maps, sms, stream);
          };
          if constexpr (prefill_ws_split_logits(kD)) {
            if constexpr (kT.block_n == 128) {
              if (maps.page_boxes != 0) {  // (ws_page_boxes: no logit transform)
                err = launch_prefill_sm90_ws<kD, kT.block_m, 128, T, WsKv::kPageBoxes, false>(p, maps, sms, stream);
                return;
              }
            }
            if (!logit_transform(p.mask)) return run(std::false_type{});
          }
          run(std::true_type{});
        };
        constexpr PrefillWsTiles kFirst = prefill_ws_tiles(kD, kWsFirst, false), kSecond = prefill_ws_tiles(kD, kWsSecond, false);
        if constexpr (kD == 64) {
          if (form == kWsPair) return launch(std::integral_constant<int, kWsPair>{});
        }
        if constexpr (kFirst.block_m != kSecond.block_m || kFirst.block_n != kSecond.block_n) {
          if (form == kWsSecond) return launch(std::integral_constant<int, kWsSecond>{});
        }
        launch(std::integral_constant<int, kWsFirst>{});
      }));
#ifdef FLASHSERVE_PREFILL_TRACE
      if (err == cudaSuccess) dump.write(stream, prefill_ws_tiles(p.head_dim, form, p.paged), sms != INT_MAX, p.mask.causal);
#endif
      return cuda_status(err, "prefill kernel (sm90, warp-specialized)");
    }
    // Forced or not: e.g. no keys at all (a map needs rows), odd strides. d 256 has no v3, nor
    // FP8 pages.
    if (fp8) return prefill_fp8_mma();
    kernel = p.head_dim == 256 ? Kernel::kMma : Kernel::kWgmma;
  }
  if (p.head_dim == 256) return prefill_mma_hd256(p, stream);
  const bool v3 = kernel == Kernel::kWgmma;
  err = cudaSuccess;
  FS_RETURN_IF_ERROR(dispatch_head_dim_dtype<Built64x128>("prefill", p.head_dim, p.dtype, [&](auto hd, auto dt) {
    constexpr int kD = decltype(hd)::value;
    using T = cuda_storage_t<decltype(dt)::value>;
    err = v3 ? launch_prefill_sm90<kD, T>(p, stream) : launch_prefill<kD, T>(p, stream);
  }));
  return cuda_status(err, v3 ? "prefill kernel (sm90)" : "prefill kernel");
}

}  // namespace flashserve::cuda
