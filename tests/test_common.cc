// dtype conversions and the thread pool.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <vector>

#include "common/dtype.h"
#include "common/status.h"
#include "common/thread_pool.h"

namespace flashserve {
namespace {

TEST(DType, HalfRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(f))));
      continue;
    }
    ASSERT_EQ(float_to_fp16(f), h) << "fp16 bits " << h;
  }
}

TEST(DType, BFloat16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), h) << "bf16 bits " << h;
  }
}

// Rounding to nearest even, checked against double arithmetic on midpoints.
TEST(DType, RoundsToNearestEven) {
  // 1 + 2^-11 is halfway between fp16 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(fp16_to_float(float_to_fp16(1.f + std::ldexp(1.f, -11))), 1.f);
  // 1 + 3·2^-11 is halfway between 1 + 2^-10 and 1 + 2^-9: ties to even (1 + 2^-9).
  EXPECT_EQ(fp16_to_float(float_to_fp16(1.f + 3 * std::ldexp(1.f, -11))), 1.f + std::ldexp(1.f, -9));
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.f + std::ldexp(1.f, -8))), 1.f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.f + 3 * std::ldexp(1.f, -8))), 1.f + std::ldexp(1.f, -6));
  EXPECT_EQ(fp16_to_float(float_to_fp16(65504.f)), 65504.f);
  EXPECT_TRUE(std::isinf(fp16_to_float(float_to_fp16(65520.f))));
  EXPECT_EQ(fp16_to_float(float_to_fp16(65519.f)), 65504.f);
  EXPECT_EQ(fp16_to_float(float_to_fp16(std::ldexp(1.f, -24))), std::ldexp(1.f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_float(float_to_fp16(std::ldexp(1.f, -26))), 0.f);
  EXPECT_TRUE(std::isnan(fp16_to_float(float_to_fp16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
}

TEST(ThreadPool, EveryIndexOnceAndNested) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(1000);
  pool.parallel_for(1000, [&](int64_t i) {
    hits[i]++;
    pool.parallel_for(3, [&](int64_t) {});  // nested: runs inline, no deadlock
  });
  for (auto& h : hits) EXPECT_EQ(h.load(), 1);
  pool.parallel_for(0, [&](int64_t) { FAIL(); });
}

TEST(Status, CodesAndMessages) {
  EXPECT_TRUE(Status::Ok().ok());
  const Status s = out_of_range("block 9");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.to_string(), "OUT_OF_RANGE: block 9");
}

}  // namespace
}  // namespace flashserve
