// Checks shared by the prefill and decode entry points.
#pragma once

#include <cstdint>

#include "attention/params.h"
#include "common/status.h"

namespace flashserve {

// softmax_scale and softcap finite, softcap >= 0, windows >= -1, slopes aligned.
Status validate_mask(const char* where, const MaskParams& mask);
// Head counts positive, GQA divisibility, head_dim supported on the device.
Status validate_heads(const char* where, int32_t num_heads, int32_t num_kv_heads, int32_t head_dim,
                      Device device);

}  // namespace flashserve
