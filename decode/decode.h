// Split-K Flash-Decoding over the paged KV cache: the decode family's entry point.
#pragma once

#include "common/status.h"
#include "decode/params.h"

namespace flashserve {

// Runs decode attention, dispatched on params.device. On the CPU, stream must be null and
// num_splits == 0 asks decode() to plan (plan_decode with the thread pool's size) and to use
// a workspace of its own. Returns a status and writes nothing when the params are bad.
Status decode(const DecodeParams& params, void* stream = nullptr);

// Checks that need no tensor contents (shared by all devices).
Status validate_decode_shapes(const DecodeParams& params);
// Checks the block table and lengths, which must be host-readable, and that the plan covers
// every sequence.
Status validate_decode_lengths_host(const DecodeParams& params);

}  // namespace flashserve
