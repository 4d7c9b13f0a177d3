// Built with -ffp-contract=off (server/CMakeLists.txt): d·q + m must round twice, as ggml and
// gguf-py round it, not once through an FMA.
#include "server/model/ggml_quants.h"

#include <cstring>

#include "common/dtype.h"

namespace flashserve::model {

namespace {

uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
float half_at(const uint8_t* p) { return fp16_to_float(le16(p)); }

// The six-bit scale and min of Q4_K sub-block s (0..7) from the 12 packed bytes: the first
// four pairs sit in the low six bits of bytes 0..3 (scales) and 4..7 (mins); the last four take
// their low four bits from bytes 8..11 and their high two from the top of bytes 0..7.
void q4k_scale_min(const uint8_t* q, int s, uint8_t* sc, uint8_t* m) {
  if (s < 4) {
    *sc = q[s] & 63;
    *m = q[s + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[s + 4] & 0xF) | ((q[s - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[s + 4] >> 4) | ((q[s] >> 6) << 4));
  }
}

void block_q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0xF) - 8);
    y[j + 16] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

void block_q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0xF) + m;
    y[j + 16] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

void block_q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

void block_q4_k(const uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  const uint8_t* qs = b + 16;
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, m;
    q4k_scale_min(scales, s, &sc, &m);
    const float ds = d * static_cast<float>(sc), ms = dmin * static_cast<float>(m);
    const uint8_t* q = qs + 32 * (s / 2);
    const int shift = 4 * (s % 2);
    for (int l = 0; l < 32; ++l) y[32 * s + l] = ds * static_cast<float>((q[l] >> shift) & 0xF) - ms;
  }
}

void block_q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int half = 0; half < 2; ++half) {
    for (int k = 0; k < 4; ++k) {
      for (int l = 0; l < 32; ++l) {
        const int e = 128 * half + 32 * k + l;
        const int low = (ql[64 * half + 32 * (k % 2) + l] >> (4 * (k / 2))) & 0xF;
        const int high = (qh[32 * half + l] >> (2 * k)) & 3;
        const int q = (low | (high << 4)) - 32;
        y[e] = (d * static_cast<float>(scales[e / 16])) * static_cast<float>(q);
      }
    }
  }
}

}  // namespace

GgmlTypeTraits ggml_type_traits(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32: return {"F32", 1, 4};
    case GgmlType::kF16: return {"F16", 1, 2};
    case GgmlType::kQ4_0: return {"Q4_0", 32, 18};
    case GgmlType::kQ4_1: return {"Q4_1", 32, 20};
    case GgmlType::kQ5_0: return {"Q5_0", 32, 22};
    case GgmlType::kQ5_1: return {"Q5_1", 32, 24};
    case GgmlType::kQ8_0: return {"Q8_0", 32, 34};
    case GgmlType::kQ2_K: return {"Q2_K", 256, 84};
    case GgmlType::kQ3_K: return {"Q3_K", 256, 110};
    case GgmlType::kQ4_K: return {"Q4_K", 256, 144};
    case GgmlType::kQ5_K: return {"Q5_K", 256, 176};
    case GgmlType::kQ6_K: return {"Q6_K", 256, 210};
    case GgmlType::kQ8_K: return {"Q8_K", 256, 292};
    case GgmlType::kIQ2_XXS: return {"IQ2_XXS", 256, 66};
    case GgmlType::kIQ2_XS: return {"IQ2_XS", 256, 74};
    case GgmlType::kIQ3_XXS: return {"IQ3_XXS", 256, 98};
    case GgmlType::kIQ1_S: return {"IQ1_S", 256, 50};
    case GgmlType::kIQ4_NL: return {"IQ4_NL", 32, 18};
    case GgmlType::kIQ3_S: return {"IQ3_S", 256, 110};
    case GgmlType::kIQ2_S: return {"IQ2_S", 256, 82};
    case GgmlType::kIQ4_XS: return {"IQ4_XS", 256, 136};
    case GgmlType::kI8: return {"I8", 1, 1};
    case GgmlType::kI16: return {"I16", 1, 2};
    case GgmlType::kI32: return {"I32", 1, 4};
    case GgmlType::kI64: return {"I64", 1, 8};
    case GgmlType::kF64: return {"F64", 1, 8};
    case GgmlType::kIQ1_M: return {"IQ1_M", 256, 56};
    case GgmlType::kBF16: return {"BF16", 1, 2};
    case GgmlType::kTQ1_0: return {"TQ1_0", 256, 54};
    case GgmlType::kTQ2_0: return {"TQ2_0", 256, 66};
    case GgmlType::kMXFP4: return {"MXFP4", 32, 17};
    case GgmlType::kQ8_1: break;  // a matmul intermediate; gguf-py and ggml disagree on its size
  }
  return {};
}

std::string ggml_type_name(uint32_t type) {
  const GgmlTypeTraits t = ggml_type_traits(type);
  return t.name ? std::string(t.name) : "type " + std::to_string(type);
}

bool ggml_can_dequantize(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16: case GgmlType::kF64:
    case GgmlType::kQ4_0: case GgmlType::kQ4_1: case GgmlType::kQ8_0: case GgmlType::kQ4_K: case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

Status dequantize(GgmlType type, const void* src, int64_t src_bytes, int64_t n, float* dst) {
  const GgmlTypeTraits t = ggml_type_traits(static_cast<uint32_t>(type));
  const std::string name = ggml_type_name(static_cast<uint32_t>(type));
  if (t.name == nullptr) return invalid_argument("dequantize: unknown ggml " + name);
  if (!ggml_can_dequantize(type)) return unsupported("dequantize: ggml type " + name + " is not supported");
  if (n < 0 || n % t.block_elems != 0)
    return invalid_argument("dequantize: " + std::to_string(n) + " elements is not a whole number of " + name +
                            " blocks (" + std::to_string(t.block_elems) + " elements each)");
  const int64_t blocks = n / t.block_elems;
  if (src_bytes != blocks * t.block_bytes)
    return invalid_argument("dequantize: " + std::to_string(n) + " " + name + " elements need " +
                            std::to_string(blocks * t.block_bytes) + " bytes, got " + std::to_string(src_bytes));
  const uint8_t* s = static_cast<const uint8_t*>(src);
  void (*block_fn)(const uint8_t*, float*) = nullptr;
  switch (type) {
    case GgmlType::kF32: std::memcpy(dst, s, static_cast<size_t>(n) * 4); return Status::Ok();
    case GgmlType::kF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = half_at(s + 2 * i);
      return Status::Ok();
    case GgmlType::kBF16:
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(le16(s + 2 * i));
      return Status::Ok();
    case GgmlType::kF64:
      for (int64_t i = 0; i < n; ++i) {
        double v;
        std::memcpy(&v, s + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      }
      return Status::Ok();
    case GgmlType::kQ4_0: block_fn = block_q4_0; break;
    case GgmlType::kQ4_1: block_fn = block_q4_1; break;
    case GgmlType::kQ8_0: block_fn = block_q8_0; break;
    case GgmlType::kQ4_K: block_fn = block_q4_k; break;
    case GgmlType::kQ6_K: block_fn = block_q6_k; break;
    default: return unsupported("dequantize: ggml type " + name + " is not supported");
  }
  for (int64_t i = 0; i < blocks; ++i) block_fn(s + i * t.block_bytes, dst + i * t.block_elems);
  return Status::Ok();
}

}  // namespace flashserve::model
