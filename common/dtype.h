// Storage types and where tensors live. Conversions between float and the 16-bit types are
// bit-exact and round to nearest even, on the host; kernels accumulate in fp32 always.
//
// FP8 (issue 25: the KV cache's quantized pages; never q, o or weights):
//   fp8_e4m3  OCP E4M3 "fn": bias 7, no infinities, S.1111.111 the only NaN, max ±448,
//             smallest normal 2^-6, subnormals k·2^-9;
//   fp8_e5m2  IEEE-like: bias 15, S.11111.00 = ±inf, S.11111.{01,10,11} NaN, max ±57344,
//             smallest normal 2^-14, subnormals k·2^-16.
// float -> fp8 rounds to nearest even and saturates, as CUDA's __nv_cvt_float_to_fp8(x,
// __NV_SATFINITE, ...) (what vLLM's and FlashInfer's FP8 KV-cache writes call): every finite
// value beyond ±max, and ±inf itself, becomes ±max (e5m2 never stores an infinity); NaN stays
// NaN (e4m3 S.1111.111, e5m2 S.11111.10); the sign of zero is kept. fp8 -> float is exact.
#pragma once

#include <cstdint>
#include <cstring>

#include "common/host_device.h"

namespace flashserve {

enum class DType : int32_t { kFloat32 = 0, kFloat16 = 1, kBFloat16 = 2, kFp8E4M3 = 3, kFp8E5M2 = 4 };
enum class Device : int32_t { kCPU = 0, kCUDA = 1 };

constexpr int dtype_size(DType t) {
  return t == DType::kFloat32 ? 4 : (t == DType::kFp8E4M3 || t == DType::kFp8E5M2) ? 1 : 2;
}
constexpr bool is_fp8(DType t) { return t == DType::kFp8E4M3 || t == DType::kFp8E5M2; }
// fp32, fp16 or bf16: the types of q, o, merge states and the K/V the model produces (FP8 is
// a KV-page type only).
constexpr bool is_activation_dtype(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}
const char* dtype_name(DType t);    // "fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2"
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

// The largest finite value of an FP8 format (448 or 57344); 0 for other types.
constexpr float fp8_max(DType t) {
  return t == DType::kFp8E4M3 ? 448.f : t == DType::kFp8E5M2 ? 57344.f : 0.f;
}

// FP8 code -> float, exact.
inline float fp8_e4m3_to_float(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t exp = (c >> 3) & 0xfu, man = c & 0x7u;
  if (exp == 0xf && man == 0x7) return bits_float(sign | 0x7fc00000u);      // the one NaN
  if (exp != 0) return bits_float(sign | ((exp + 120) << 23) | (man << 20));  // 127 - 7
  return bits_float(sign | float_bits(static_cast<float>(man) * 0.001953125f));  // man·2^-9
}

// CUDA's __byte_perm(x, y, s) selection (without its sign-replicating mode): result byte i is
// byte (s >> 4i) & 7 of y:x (x bytes 0-3, y bytes 4-7). On the device the instruction itself.
FS_HOST_DEVICE uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(x, y, s);
#else
  const uint64_t yx = (static_cast<uint64_t>(y) << 32) | x;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<uint32_t>((yx >> (8 * ((s >> (4 * i)) & 7u))) & 0xffu) << (8 * i);
  return r;
#endif
}

// Four e5m2 codes (bytes 0..3 of x) as the bits of two fp16 pairs (lo: codes 0, 1; hi: 2, 3).
// An e5m2 code is the high byte of its value's fp16 (sign, 5 exponent bits of the same bias, the
// top 2 mantissa bits), inf and NaN included, so byte placement is the exact conversion: the
// GPU kernels' e5m2 path (fp8_convert.cuh), a PRMT a pair where F2FP took a conversion.
FS_HOST_DEVICE void fp8_e5m2x4_to_fp16x2x2(uint32_t x, uint32_t& lo, uint32_t& hi) {
  lo = byte_perm(x, 0u, 0x1404u);
  hi = byte_perm(x, 0u, 0x3424u);
}

inline float fp8_e5m2_to_float(uint8_t c) {
  const uint32_t sign = static_cast<uint32_t>(c & 0x80u) << 24;
  const uint32_t exp = (c >> 2) & 0x1fu, man = c & 0x3u;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000u | (man << 21));      // inf, NaN
  if (exp != 0) return bits_float(sign | ((exp + 112) << 23) | (man << 21));  // 127 - 15
  return bits_float(sign | float_bits(static_cast<float>(man) * 1.52587890625e-5f));  // man·2^-16
}

// float -> FP8 code of a format with `man_bits` mantissa bits and exponent bias `bias`: round to
// nearest even, saturate to ±max_code's value (see the top of this file).
template <int kManBits, int kBias>
inline uint8_t float_to_fp8_rne_sat(float f, uint8_t max_code, float max_value, uint8_t nan_code) {
  const uint32_t u = float_bits(f);
  const uint8_t sign = static_cast<uint8_t>((u >> 24) & 0x80u);
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return sign | nan_code;
  if (bits_float(a) >= max_value) return sign | max_code;  // finite overflow and inf
  // Below the smallest normal 2^(1 - bias): a multiple of 2^(1 - bias - man_bits); value / that
  // step rounded to nearest even is the code (8 << ... carries into the smallest normal's code).
  constexpr uint32_t kMinNormalBits = static_cast<uint32_t>(127 + 1 - kBias) << 23;
  if (a < kMinNormalBits) {
    const float steps = bits_float(a) * bits_float(static_cast<uint32_t>(127 + kBias - 1 + kManBits) << 23);
    return sign | static_cast<uint8_t>(__builtin_nearbyintf(steps));  // default rounding: nearest even
  }
  // Normal: rebias the exponent and round the 23 - man_bits dropped mantissa bits to nearest even.
  constexpr int kDrop = 23 - kManBits;
  uint32_t v = a - (static_cast<uint32_t>(127 - kBias) << 23);
  v += ((1u << (kDrop - 1)) - 1u) + ((v >> kDrop) & 1u);
  return sign | static_cast<uint8_t>(v >> kDrop);  // below max_value: no carry past max_code
}

inline uint8_t float_to_fp8_e4m3(float f) { return float_to_fp8_rne_sat<3, 7>(f, 0x7e, 448.f, 0x7f); }
inline uint8_t float_to_fp8_e5m2(float f) { return float_to_fp8_rne_sat<2, 15>(f, 0x7b, 57344.f, 0x7e); }

// Reads element i of a buffer of type t as float (FP8: the code's value, no scale).
inline float load_as_float(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kFloat32: return static_cast<const float*>(p)[i];
    case DType::kFloat16: return fp16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kBFloat16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::kFp8E4M3: return fp8_e4m3_to_float(static_cast<const uint8_t*>(p)[i]);
    case DType::kFp8E5M2: return fp8_e5m2_to_float(static_cast<const uint8_t*>(p)[i]);
  }
  return 0.f;
}

inline void store_from_float(void* p, DType t, int64_t i, float v) {
  switch (t) {
    case DType::kFloat32: static_cast<float*>(p)[i] = v; break;
    case DType::kFloat16: static_cast<uint16_t*>(p)[i] = float_to_fp16(v); break;
    case DType::kBFloat16: static_cast<uint16_t*>(p)[i] = float_to_bf16(v); break;
    case DType::kFp8E4M3: static_cast<uint8_t*>(p)[i] = float_to_fp8_e4m3(v); break;  // scale 1
    case DType::kFp8E5M2: static_cast<uint8_t*>(p)[i] = float_to_fp8_e5m2(v); break;
  }
}

// Rounds v to the nearest value representable in t (identity for fp32).
inline float round_to(DType t, float v) {
  switch (t) {
    case DType::kFloat32: return v;
    case DType::kFloat16: return fp16_to_float(float_to_fp16(v));
    case DType::kBFloat16: return bf16_to_float(float_to_bf16(v));
    case DType::kFp8E4M3: return fp8_e4m3_to_float(float_to_fp8_e4m3(v));
    case DType::kFp8E5M2: return fp8_e5m2_to_float(float_to_fp8_e5m2(v));
  }
  return v;
}

// Converts n contiguous elements of type t to float (the hot loop of the CPU kernels).
void convert_to_float(const void* src, DType t, int64_t n, float* dst);
// Converts n floats to type t, rounding to nearest even (FP8: saturating, no scale).
void convert_from_float(const float* src, DType t, int64_t n, void* dst);

}  // namespace flashserve
