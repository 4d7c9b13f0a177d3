// The CUDA prefill path behind prefill().
#pragma once

#include "attention/params.h"
#include "common/status.h"

// TMA page boxes for pages of 128 tokens or more (sessions 43-44; issue 22's "when block_size >=
// the key tile, TMA page by page"; the paged walk of prefill_sm90_ws_kernel.cuh): where the host
// encoded the pool's maps (PrefillTmaMaps::page_boxes: 16-bit pages of >= 128 tokens, 128-key
// tiles; prefill_cuda.cu's ws_page_boxes), an item's tiles start at a multiple of 128 keys, and a
// tile whose keys all exist comes as the page's two column boxes from producer thread 0 (the page
// id read from the table as the tile is issued); a sequence's last, partial tile by the row
// gather (zeros past its keys). Unlike the gather, the boxes read the sequence's keys outside a
// row's window or past its causal edge (masked, P = 0: they must be finite, as a sequence's keys
// are; slots past its length, the free ones, are never read). The walk has
// two tile loops, boxes and row gather, so that the gather's is the one of a build without the
// boxes (in one loop the producer spilled more at 24 registers: 16-token pages -3..-9%, session 43
// call 2; in one walk, 16-token pages -1.6..-2.3%, 128/256-token pages +4.0..+8.1%, session 44
// call 1). Two walks (pb3, the gather's tile loop the tree's, SASS): written, not yet measured,
// so 0 (default): the row gather only (the paged instances' SASS of v4.33); 1: the boxes, and the
// host's ws_page_boxes (FLASHSERVE_PREFILL_WS_PAGE_BOXES=0 in the environment turns them off).
#ifndef FLASHSERVE_PREFILL_WS_PAGE_BOXES
#define FLASHSERVE_PREFILL_WS_PAGE_BOXES 0
#endif

namespace flashserve::cuda {

// Checks specific to the CUDA kernels: head dims, dtypes, 16-byte alignment, max_seqlen_q.
Status validate_prefill_cuda(const PrefillParams& p);
// Launches on `stream` (asynchronous); params validated.
Status prefill_cuda(const PrefillParams& p, void* stream);

// The key tile (keys a K/V tile) the warp-specialized Hopper kernel takes for p: 176 or 128 at
// head_dim 128 (the wide tile's rule, ws_alt_tile), 128 at 64, 80 at 256, 0 at other head dims.
// Reads p's shapes, mask and pages' dtype and FLASHSERVE_PREFILL_WS_BLOCK_N, no tensor.
int prefill_ws_key_tile(const PrefillParams& p);
// Whether the warp-specialized Hopper kernel takes p's pages by TMA page boxes: 16-bit pages of 128
// tokens or more on the 128-key tile, the pool's maps encoded by the driver (false elsewhere, or
// without FLASHSERVE_PREFILL_WS_PAGE_BOXES; then the row gather). Reads p's shapes and pool view.
bool prefill_ws_page_boxes(const PrefillParams& p);

}  // namespace flashserve::cuda
