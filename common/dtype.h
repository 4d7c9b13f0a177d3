// Storage types and where tensors live. Conversions between float and the 16-bit types are
// bit-exact and round to nearest even, on the host; kernels accumulate in fp32 always.
#pragma once

#include <cstdint>
#include <cstring>

namespace flashserve {

enum class DType : int32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2 };
enum class Device : int32_t { kCPU = 0, kCUDA = 1 };

constexpr int dtype_size(DType t) { return t == DType::kFloat32 ? 4 : 2; }
const char* dtype_name(DType t);    // "fp32", "fp16", "bf16"
const char* device_name(Device d);  // "cpu", "cuda"
bool is_valid(DType t);
bool is_valid(Device d);

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bf16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest even
  return static_cast<uint16_t>(u >> 16);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 13));  // inf, NaN
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (man << 13));
  // zero or subnormal: man * 2^-24, exact in float
  const float mag = static_cast<float>(man) * 5.9604644775390625e-8f;
  return sign ? -mag : mag;
}

inline uint16_t float_to_fp16(float f) {
  const uint32_t u = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | 0x7e00u;             // NaN
  if (a >= 0x477ff000u) return sign | 0x7c00u;            // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                  // below 2^-14: subnormal or zero
    // value * 2^24 rounded to nearest even is the subnormal mantissa
    const float mag = bits_float(a) * 16777216.0f;
    float r = __builtin_nearbyintf(mag);  // default rounding mode: nearest even
    return sign | static_cast<uint16_t>(r);
  }
  // normal: rebias exponent (127 -> 15) and round the 13 dropped mantissa bits to nearest even
  uint32_t v = a - (112u << 23);
  v += 0xfffu + ((v >> 13) & 1u);
  return sign | static_cast<uint16_t>(v >> 13);
}

// Reads element i of a buffer of type t as float.
inline float load_as_float(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  return 0.f;
}

inline void store_from_float(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(p)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_fp16(v); break;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(v); break;
  }
}

// Rounds v to the nearest value representable in t (identity for fp32).
inline float round_to(DType t, float v) {
  switch (t) {
    case DType::kFloat32: return v;
    case DType::kFloat16: return fp16_to_float(float_to_fp16(v));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(v));
  }
  return v;
}

// Converts n contiguous elements of type t to float (the hot loop of the CPU kernels).
void convert_to_float(const void* src, DType t, int64_t n, float* dst);
// Converts n floats to type t, rounding to nearest even.
void convert_from_float(const float* src, DType t, int64_t n, void* dst);

}  // namespace flashserve
