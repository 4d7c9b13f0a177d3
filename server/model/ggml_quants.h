// ggml's tensor types as GGUF files store them (the numbering of ggml.h's `ggml_type`), their
// block geometry, and dequantization to fp32 of the ones the model reads: F32, F16, BF16, F64,
// Q8_0, Q4_0, Q4_1, Q4_K and Q6_K. Every other known type is UNSUPPORTED by name.
//
// A row of ne[0] elements is ne[0] / block_elems blocks of block_bytes bytes; the layouts (all
// little-endian, d/m/dmin are IEEE fp16):
//   Q4_0  32 elems, 18 B: d, qs[16]            x[j] = d·((qs[j] & 15) - 8), x[j+16] = d·((qs[j] >> 4) - 8)
//   Q4_1  32 elems, 20 B: d, m, qs[16]         x[j] = d·(qs[j] & 15) + m,   x[j+16] = d·(qs[j] >> 4) + m
//   Q8_0  32 elems, 34 B: d, int8 qs[32]       x[j] = qs[j]·d
//   Q4_K 256 elems, 144 B: d, dmin, scales[12] (8 six-bit scale/min pairs), qs[128]: eight
//        sub-blocks of 32; sub-block s reads nibble s%2 of qs[32·(s/2) .. +32],
//        x = (d·sc_s)·q - (dmin·m_s)
//   Q6_K 256 elems, 210 B: ql[128], qh[64], int8 scales[16], d: two halves of 128; in a half,
//        element 32·k + l (k 0..3, l 0..31) is q = (nibble k/2 of ql[32·(k%2) + l]) | (bits 2k..2k+1
//        of qh[l]) << 4, minus 32; x = (d·scales[e/16])·q, e the element's index in the block
// The arithmetic is done in fp32 in the order written (this file is compiled without FMA
// contraction), which is how ggml and gguf-py (and so Hugging Face transformers) compute it:
// the same bits.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace flashserve::model {

enum class GgmlType : uint32_t {
  kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ4_1 = 3, kQ5_0 = 6, kQ5_1 = 7, kQ8_0 = 8, kQ8_1 = 9,
  kQ2_K = 10, kQ3_K = 11, kQ4_K = 12, kQ5_K = 13, kQ6_K = 14, kQ8_K = 15,
  kIQ2_XXS = 16, kIQ2_XS = 17, kIQ3_XXS = 18, kIQ1_S = 19, kIQ4_NL = 20, kIQ3_S = 21, kIQ2_S = 22,
  kIQ4_XS = 23, kI8 = 24, kI16 = 25, kI32 = 26, kI64 = 27, kF64 = 28, kIQ1_M = 29, kBF16 = 30,
  kTQ1_0 = 34, kTQ2_0 = 35, kMXFP4 = 39,
};

struct GgmlTypeTraits {
  const char* name = nullptr;  // "Q4_K"; null: not a type a GGUF file may hold
  int64_t block_elems = 0;     // elements a block
  int64_t block_bytes = 0;     // bytes a block
};

// The traits of a raw type id; name == nullptr for ids that are unknown, removed from ggml
// (4, 5, 31..33, 36..38) or never stored in files (Q8_1, whose size even differs between ggml
// and gguf-py).
GgmlTypeTraits ggml_type_traits(uint32_t type);
// "Q4_K", or "type 42" for an unknown id.
std::string ggml_type_name(uint32_t type);
bool ggml_can_dequantize(GgmlType type);

// Dequantizes n elements (a whole number of blocks: n % block_elems == 0) from src, which holds
// src_bytes bytes (exactly n / block_elems · block_bytes), into dst[n].
Status dequantize(GgmlType type, const void* src, int64_t src_bytes, int64_t n, float* dst);

}  // namespace flashserve::model
