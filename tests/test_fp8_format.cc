// FP8 formats (issue 25): the host conversions of common/dtype.h against a float64 reference
// written from the formats' definitions alone (every code's value from its sign, exponent and
// mantissa fields; the nearest value by search over all of them, ties to the even code; the
// saturating convention of CUDA's __NV_SATFINITE). Exhaustive over the 256 codes, every
// midpoint and its float neighbours, and random floats over the whole range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"

namespace flashserve {
namespace {

struct Format {
  DType dtype;
  int exp_bits, man_bits, bias;
  bool ieee_specials;  // e5m2: the top exponent holds inf and NaN; e4m3: only S.1111.111 is NaN
  double max;
  uint8_t max_code;
};

void PrintTo(const Format& f, std::ostream* os) { *os << dtype_name(f.dtype); }

const Format kE4M3{DType::kFp8E4M3, 4, 3, 7, false, 448.0, 0x7e};
const Format kE5M2{DType::kFp8E5M2, 5, 2, 15, true, 57344.0, 0x7b};

// The value of code c by the format's definition, in float64.
double ref_value(const Format& f, int c) {
  const int sign = (c >> 7) & 1;
  const int exp = (c >> f.man_bits) & ((1 << f.exp_bits) - 1);
  const int man = c & ((1 << f.man_bits) - 1);
  const int top = (1 << f.exp_bits) - 1;
  const double s = sign ? -1.0 : 1.0;
  if (f.ieee_specials && exp == top)
    return man == 0 ? s * std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  if (!f.ieee_specials && exp == top && man == (1 << f.man_bits) - 1) return std::numeric_limits<double>::quiet_NaN();
  const double frac = static_cast<double>(man) / (1 << f.man_bits);
  if (exp == 0) return s * std::ldexp(frac, 1 - f.bias);
  return s * std::ldexp(1.0 + frac, exp - f.bias);
}

float decode(const Format& f, uint8_t c) {
  return f.dtype == DType::kFp8E4M3 ? fp8_e4m3_to_float(c) : fp8_e5m2_to_float(c);
}
uint8_t encode(const Format& f, float x) {
  return f.dtype == DType::kFp8E4M3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x);
}

// Non-negative finite codes in increasing value: 0x00 .. max_code (values increase with the code).
std::vector<std::pair<double, int>> finite_nonnegative(const Format& f) {
  std::vector<std::pair<double, int>> v;
  for (int c = 0; c <= f.max_code; ++c) v.push_back({ref_value(f, c), c});
  return v;
}

// The reference encoder: NaN stays NaN (-1 here: any NaN code passes), |x| >= max gives ±max
// (inf too), otherwise the nearest value, a tie to the code with an even mantissa; the sign
// kept (also of zero).
int ref_encode(const Format& f, double x) {
  if (std::isnan(x)) return -1;
  const int sign = std::signbit(x) ? 0x80 : 0;
  const double a = std::fabs(x);
  if (a >= f.max) return sign | f.max_code;
  static thread_local std::vector<std::pair<double, int>> table_e4m3, table_e5m2;
  auto& table = f.dtype == DType::kFp8E4M3 ? table_e4m3 : table_e5m2;
  if (table.empty()) table = finite_nonnegative(f);
  int best = table[0].second;
  double best_err = std::fabs(a - table[0].first);
  for (const auto& [value, code] : table) {
    const double err = std::fabs(a - value);
    if (err < best_err || (err == best_err && (code & 1) == 0)) {
      best = code;
      best_err = err;
    }
  }
  return sign | best;
}

std::string hex(int c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02x", c & 0xff);
  return buf;
}

class Fp8Format : public ::testing::TestWithParam<Format> {};

TEST_P(Fp8Format, DecodeEveryCodeExactly) {
  const Format f = GetParam();
  int nans = 0, infs = 0;
  for (int c = 0; c < 256; ++c) {
    const double want = ref_value(f, c);
    const float got = decode(f, static_cast<uint8_t>(c));
    EXPECT_EQ(float_bits(load_as_float(&c, f.dtype, 0)), float_bits(got)) << "load_as_float of " << hex(c);  // byte 0
    if (std::isnan(want)) {
      ++nans;
      EXPECT_TRUE(std::isnan(got)) << dtype_name(f.dtype) << " code " << hex(c) << " is NaN, got " << got;
      continue;
    }
    if (std::isinf(want)) ++infs;
    EXPECT_EQ(static_cast<double>(got), want) << dtype_name(f.dtype) << " code " << hex(c);
    EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "sign of " << hex(c);
  }
  EXPECT_EQ(nans, f.ieee_specials ? 6 : 2);  // e5m2: S.11111.{01,10,11}; e4m3: S.1111.111
  EXPECT_EQ(infs, f.ieee_specials ? 2 : 0);
  EXPECT_EQ(decode(f, f.max_code), f.max);
  EXPECT_EQ(decode(f, f.max_code | 0x80), -f.max);
  EXPECT_EQ(static_cast<double>(fp8_max(f.dtype)), f.max);
}

TEST_P(Fp8Format, EncodeOfDecodeIsTheCode) {
  const Format f = GetParam();
  for (int c = 0; c < 256; ++c) {
    const float x = decode(f, static_cast<uint8_t>(c));
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(decode(f, encode(f, x)))) << "NaN " << hex(c) << " must stay NaN";
    } else if (std::isinf(x)) {  // e5m2's ±inf saturates to ±max
      EXPECT_EQ(encode(f, x), (c & 0x80) | f.max_code) << hex(c);
    } else {
      EXPECT_EQ(encode(f, x), c) << dtype_name(f.dtype) << " value " << x << " code " << hex(c) << " came back as "
                                 << hex(encode(f, x));
    }
  }
}

// Every midpoint between neighbouring values (exact in float: at most man_bits + 2 significant
// bits), one float step either side of it, and the values themselves, both signs, against the
// reference encoder. Midpoints are where round-to-nearest-even decides.
TEST_P(Fp8Format, MidpointsTieToEvenAndNeighboursRoundToNearest) {
  const Format f = GetParam();
  const auto table = finite_nonnegative(f);
  std::vector<float> xs;
  int ties = 0;
  for (size_t i = 0; i < table.size(); ++i) {
    xs.push_back(static_cast<float>(table[i].first));
    const double mid = i + 1 < table.size() ? 0.5 * (table[i].first + table[i + 1].first)
                                            : table[i].first + 0.5 * (table[i].first - table[i - 1].first);
    const float m = static_cast<float>(mid);
    ASSERT_EQ(static_cast<double>(m), mid) << "midpoint not exact in float";
    xs.push_back(m);
    xs.push_back(std::nextafter(m, 0.f));
    xs.push_back(std::nextafter(m, INFINITY));
    ++ties;
  }
  for (float x : xs) {
    for (float sx : {x, -x}) {
      const int want = ref_encode(f, sx);
      const uint8_t got = encode(f, sx);
      ASSERT_EQ(got, want) << dtype_name(f.dtype) << " x = " << sx << " (" << std::hexfloat << sx << std::defaultfloat
                           << "): got " << hex(got) << " = " << decode(f, got) << ", want " << hex(want) << " = "
                           << decode(f, static_cast<uint8_t>(want));
    }
  }
  EXPECT_GT(ties, 100);
  // Worked ties: e4m3 1.0625 lies between 1 (0x38, even) and 1.125 (0x39): 1; 1.1875 between
  // 1.125 (odd) and 1.25 (0x3a, even): 1.25. Subnormal: half the smallest step goes to 0.
  if (f.dtype == DType::kFp8E4M3) {
    EXPECT_EQ(encode(f, 1.0625f), 0x38);
    EXPECT_EQ(encode(f, 1.1875f), 0x3a);
    EXPECT_EQ(encode(f, std::ldexp(1.f, -10)), 0x00);  // 2^-9 / 2
    EXPECT_EQ(encode(f, std::ldexp(3.f, -10)), 0x02);  // 1.5 steps: to 2 steps (even)
    EXPECT_EQ(encode(f, -std::ldexp(5.f, -10)), 0x82);  // 2.5 steps: to 2 steps
  } else {
    EXPECT_EQ(encode(f, 1.125f), 0x3c);  // between 1 (0x3c, even) and 1.25 (0x3d)
    EXPECT_EQ(encode(f, 1.375f), 0x3e);  // between 1.25 (odd) and 1.5 (0x3e)
    EXPECT_EQ(encode(f, std::ldexp(1.f, -17)), 0x00);
    EXPECT_EQ(encode(f, std::ldexp(3.f, -17)), 0x02);
  }
}

TEST_P(Fp8Format, RandomFloatsOverTheWholeRange) {
  const Format f = GetParam();
  std::mt19937_64 rng(2025);
  // Log-uniform magnitudes from far below the smallest subnormal to far above max, random sign.
  std::uniform_real_distribution<double> log2mag(-30.0, 20.0);
  for (int i = 0; i < 200000; ++i) {
    float x = static_cast<float>(std::exp2(log2mag(rng)));
    if (rng() & 1) x = -x;
    const int want = ref_encode(f, x);
    const uint8_t got = encode(f, x);
    ASSERT_EQ(got, want) << dtype_name(f.dtype) << " x = " << std::hexfloat << x << ": got " << hex(got)
                         << ", want " << hex(want) << " (seed 2025, draw " << std::dec << i << ")";
  }
}

// Finite overflow and infinities saturate to ±max (vLLM's FP8 cache writes and CUDA's
// __NV_SATFINITE); NaN stays NaN whatever its sign or payload; zero keeps its sign.
TEST_P(Fp8Format, SaturationNaNAndSignedZero) {
  const Format f = GetParam();
  const float max = static_cast<float>(f.max);
  const float above[] = {std::nextafter(max, INFINITY), max * 1.0625f, max * 1.5f, max * 2, 1e30f,
                         std::numeric_limits<float>::max(), INFINITY};
  for (float x : above) {
    EXPECT_EQ(encode(f, x), f.max_code) << x;
    EXPECT_EQ(encode(f, -x), 0x80 | f.max_code) << -x;
  }
  EXPECT_EQ(encode(f, max), f.max_code);
  EXPECT_EQ(encode(f, std::nextafter(max, 0.f)), f.max_code);
  const uint32_t nan_bits[] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu};
  for (uint32_t b : nan_bits) {
    const float x = bits_float(b);
    EXPECT_TRUE(std::isnan(decode(f, encode(f, x)))) << std::hex << b;
    EXPECT_TRUE(std::isnan(round_to(f.dtype, x)));
  }
  EXPECT_EQ(encode(f, 0.f), 0x00);
  EXPECT_EQ(encode(f, -0.f), 0x80);
  EXPECT_TRUE(std::signbit(decode(f, 0x80)));
  EXPECT_EQ(encode(f, std::numeric_limits<float>::denorm_min()), 0x00);
  EXPECT_EQ(encode(f, -std::numeric_limits<float>::denorm_min()), 0x80);
}

TEST_P(Fp8Format, StorageHelpers) {
  const Format f = GetParam();
  EXPECT_EQ(dtype_size(f.dtype), 1);
  EXPECT_TRUE(is_valid(f.dtype));
  EXPECT_TRUE(is_fp8(f.dtype));
  EXPECT_FALSE(is_activation_dtype(f.dtype));
  EXPECT_STREQ(dtype_name(f.dtype), f.dtype == DType::kFp8E4M3 ? "fp8_e4m3" : "fp8_e5m2");
  // store_from_float / convert_to_float / round_to: the same conversions, scale 1.
  const float xs[] = {0.3f, -1.7f, 3.14159f, -1000.f, 1e-6f, 250.f};
  uint8_t buf[6];
  float back[6];
  for (int i = 0; i < 6; ++i) store_from_float(buf, f.dtype, i, xs[i]);
  convert_to_float(buf, f.dtype, 6, back);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(buf[i], encode(f, xs[i]));
    EXPECT_EQ(back[i], decode(f, buf[i]));
    EXPECT_EQ(round_to(f.dtype, xs[i]), back[i]);
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, Fp8Format, ::testing::Values(kE4M3, kE5M2),
                         [](const ::testing::TestParamInfo<Format>& i) {
                           return std::string(i.param.dtype == DType::kFp8E4M3 ? "E4M3" : "E5M2");
                         });

// The GPU kernels' e5m2 conversion by byte placement (fp8_e5m2x4_to_fp16x2x2): every code in
// every byte of a word gives, as fp16, the value the float64 reference decodes (NaN as NaN, the
// signs of zero and inf kept), in its half; the word's other codes do not leak into it.
TEST(DType, E5m2ToFp16ByBytePlacementIsExact) {
  std::mt19937 rng(25);
  for (int pos = 0; pos < 4; ++pos) {
    for (int code = 0; code < 256; ++code) {
      const uint32_t others = rng() & ~(0xffu << (8 * pos));
      const uint32_t x = others | (static_cast<uint32_t>(code) << (8 * pos));
      uint32_t lo = 0, hi = 0;
      fp8_e5m2x4_to_fp16x2x2(x, lo, hi);
      const uint32_t pair = pos < 2 ? lo : hi;
      const auto half = static_cast<uint16_t>(pos % 2 == 0 ? pair & 0xffffu : pair >> 16);
      const float got = fp16_to_float(half), want = static_cast<float>(decode(kE5M2, static_cast<uint8_t>(code)));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "code " << code << " in byte " << pos;
      } else {
        EXPECT_EQ(got, want) << "code " << code << " in byte " << pos;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << "code " << code << " in byte " << pos;
      }
      EXPECT_EQ(half & 0xffu, 0u) << "the low byte of the fp16 holds nothing of another code";
    }
  }
}

TEST(DType, SixteenBitAndFp32Unchanged) {
  EXPECT_EQ(dtype_size(DType::kFloat32), 4);
  EXPECT_EQ(dtype_size(DType::kFloat16), 2);
  EXPECT_EQ(dtype_size(DType::kBFloat16), 2);
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    EXPECT_TRUE(is_activation_dtype(t));
    EXPECT_FALSE(is_fp8(t));
  }
  EXPECT_FALSE(is_valid(static_cast<DType>(5)));
}

}  // namespace
}  // namespace flashserve
