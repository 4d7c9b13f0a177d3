// The CPU implementations behind the public dispatchers. Params are already validated.
#pragma once

#include "attention/merge.h"
#include "attention/params.h"
#include "common/status.h"

namespace flashserve::cpu {

Status prefill_cpu(const PrefillParams& p);
Status merge_cpu(const MergeParams& p);

}  // namespace flashserve::cpu
