// The CUDA prefill path behind prefill().
#pragma once

#include "attention/params.h"
#include "common/status.h"

// TMA page boxes for pages of 128 tokens or more (sessions 43-45; issue 22's "when block_size >=
// the key tile, TMA page by page"). Where the host encoded the pool's maps (PrefillTmaMaps::
// page_boxes: 16-bit pages of 128 tokens or more, 128-key tiles, no logit transform;
// prefill_cuda.cu's ws_page_boxes), the WsKv::kPageBoxes instances run (prefill_sm90_ws_kernel.cuh's
// paged walk): an item's tiles start at a multiple of 128 keys, and a tile whose keys all exist
// comes as the page's two column boxes from producer thread 0 (the page id read from the table as
// the tile is issued); a sequence's last, partial tile by the row gather (zeros past its keys).
// Unlike the gather, the boxes read the sequence's keys outside a row's window or past its causal
// edge (masked, P = 0: they must be finite, as a sequence's keys are; slots past its length, the
// free ones, are never read). Instances of their own (d 64's two row tiles and d 128, bf16 and
// fp16), so that the row gather's keep their code: as a run-time path in the gather's instances
// the boxes cost 16-token pages up to 3.1% (session 44 call 1, one walk: -1.6..-2.3% on 128-key
// rows; session 45 call 1, two walks: 4x4k causal -2.1%, skewed causal -3.1%), while pages of
// 128 and 256 tokens gained 3.2-7.8% (session 45 call 1, H200, 8 passes).
// FLASHSERVE_PREFILL_WS_PAGE_BOXES=0 in the environment keeps such pages on the row gather and its
// tile rule (A/B, cross-checks).

namespace flashserve::cuda {

// Checks specific to the CUDA kernels: head dims, dtypes, 16-byte alignment, max_seqlen_q.
Status validate_prefill_cuda(const PrefillParams& p);
// Launches on `stream` (asynchronous); params validated. Capturable: a captured launch holds
// counters of its own for as long as its graph (prefill_cuda.cu, CapturedPairs, says which graphs
// share them and must not run at once). Do not cudaDeviceReset a device that prefill has run on.
Status prefill_cuda(const PrefillParams& p, void* stream);

// The key tile (keys a K/V tile) the warp-specialized Hopper kernel takes for p: 176 or 128 at
// head_dim 128 (the wide tile's rule, ws_tile_form), 128 at 64, 80 at 256, 0 at other head dims.
// Reads p's shapes, mask and pages and FLASHSERVE_PREFILL_WS_BLOCK_N / _BLOCK_M / _PAGE_BOXES,
// no tensor.
int prefill_ws_key_tile(const PrefillParams& p);
// The query rows of that kernel's tile for p: at head_dim 64 192, or for the short rows 64 (two
// CTAs an SM) where K/V are packed and 128 where they are paged (the rule, ws_tile_form); 128 at
// 128 and 256, 0 at other head dims. Reads p's shapes and mask and FLASHSERVE_PREFILL_WS_BLOCK_M.
int prefill_ws_tile_rows(const PrefillParams& p);
// Whether the warp-specialized Hopper kernel takes p's pages by TMA page boxes: 16-bit pages of 128
// tokens or more on the 128-key tile, no logit transform, the pool's maps encoded by the driver
// (false elsewhere, or under FLASHSERVE_PREFILL_WS_PAGE_BOXES=0; then the row gather). Reads p's
// shapes, mask and pool view.
bool prefill_ws_page_boxes(const PrefillParams& p);
// The dynamic walk's counter pairs that launches captured into graphs hold on the current device
// (unless FLASHSERVE_PREFILL_WS_CAPTURED_SCHED=0): taken at capture, given back when the graph and the
// executable graphs made from it are gone (tests).
int prefill_ws_captured_pairs_in_use();

}  // namespace flashserve::cuda
