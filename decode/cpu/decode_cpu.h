#pragma once

#include "common/status.h"
#include "decode/params.h"

namespace flashserve::cpu {

// CPU split-K decode; params validated, num_splits >= 1.
Status decode_cpu(const DecodeParams& p);

}  // namespace flashserve::cpu
