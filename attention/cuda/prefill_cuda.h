// The CUDA prefill path behind prefill().
#pragma once

#include "attention/params.h"
#include "common/status.h"

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
