// dtype conversions, the thread pool and the (head_dim, dtype) dispatch.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention/dispatch.h"
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

// The dispatch helper calls the listed instance equal to the run-time pair, exactly once, with
// compile-time values; every other pair (head dims and dtypes outside the lists, an invalid
// dtype) is UNSUPPORTED and calls nothing.
TEST(Dispatch, CallsTheMatchingInstanceOnlyAndRefusesTheRest) {
  using Built = KernelInstances<HeadDims<64, 128, 80>, DTypes<DType::kFloat16, DType::kBFloat16>>;
  const DType dtypes[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16, static_cast<DType>(7)};
  for (int head_dim : {0, 1, 63, 64, 80, 96, 128, 256}) {
    for (DType dtype : dtypes) {
      int calls = 0, got_hd = -1;
      DType got_dt = DType::kFloat32;
      const Status st = dispatch_head_dim_dtype<Built>("test", head_dim, dtype, [&](auto hd, auto dt) {
        static_assert(decltype(hd)::value == 64 || decltype(hd)::value == 128 || decltype(hd)::value == 80);
        ++calls;
        got_hd = decltype(hd)::value;
        got_dt = decltype(dt)::value;
      });
      const bool built = (head_dim == 64 || head_dim == 80 || head_dim == 128) &&
                         (dtype == DType::kFloat16 || dtype == DType::kBFloat16);
      SCOPED_TRACE("head_dim " + std::to_string(head_dim) + ", dtype " + std::to_string(static_cast<int>(dtype)));
      EXPECT_EQ(is_built<Built>(head_dim, dtype), built);
      if (built) {
        EXPECT_TRUE(st.ok()) << st.to_string();
        EXPECT_EQ(calls, 1);
        EXPECT_EQ(got_hd, head_dim);
        EXPECT_EQ(got_dt, dtype);
      } else {
        EXPECT_EQ(st.code(), StatusCode::kUnsupported);
        EXPECT_EQ(calls, 0);
      }
    }
  }
  EXPECT_EQ(check_built<Built>("decode on CUDA", 96, DType::kBFloat16).message(),
            "decode on CUDA: head_dim 96 with bf16 is not built (head_dim 64, 128, 80; fp16, bf16)");
  EXPECT_EQ(check_built<Built>("x", 64, static_cast<DType>(7)).message(),
            "x: head_dim 64 with an invalid dtype is not built (head_dim 64, 128, 80; fp16, bf16)");
}

TEST(Dispatch, NumbersEachBuiltInstanceOnceInOrder) {
  // Head dims slowest, as a table kept per instance (decode's launch-shape cache) indexes it.
  using Built = KernelInstances<HeadDims<64, 128, 80>, DTypes<DType::kFloat16, DType::kBFloat16>>;
  static_assert(instance_count<Built>() == 6);
  static_assert(instance_index<Built>(64, DType::kFloat16) == 0);
  static_assert(instance_index<Built>(80, DType::kBFloat16) == 5);
  std::vector<int> seen(6, 0);
  for (int head_dim : {1, 64, 80, 96, 128, 256})
    for (DType dtype : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
      const int i = instance_index<Built>(head_dim, dtype);
      EXPECT_EQ(i >= 0, is_built<Built>(head_dim, dtype)) << head_dim;
      if (i < 0) continue;
      ASSERT_LT(i, instance_count<Built>());
      ++seen[static_cast<size_t>(i)];
      const int hd_pos = head_dim == 64 ? 0 : head_dim == 128 ? 1 : 2;
      EXPECT_EQ(i, hd_pos * 2 + (dtype == DType::kBFloat16 ? 1 : 0)) << head_dim;
    }
  for (int n : seen) EXPECT_EQ(n, 1);
}

TEST(Dispatch, PassesTheCallsStatusThroughAndDispatchesOnDtypeAlone) {
  using Built = KernelInstances<HeadDims<128>, DTypes<DType::kBFloat16>>;
  const Status st =
      dispatch_head_dim_dtype<Built>("t", 128, DType::kBFloat16, [](auto, auto) { return internal_error("boom"); });
  EXPECT_EQ(st.to_string(), "INTERNAL: boom");
  using Inputs = DTypes<DType::kFloat32, DType::kBFloat16>;
  int size = 0;
  EXPECT_TRUE(dispatch_dtype<Inputs>("merge", DType::kFloat32, [&](auto dt) { size = dtype_size(dt); }).ok());
  EXPECT_EQ(size, 4);
  const Status refused = dispatch_dtype<Inputs>("merge", DType::kFloat16, [&](auto) { size = -1; });
  EXPECT_EQ(refused.to_string(), "UNSUPPORTED: merge: fp16 is not built (fp32, bf16)");
  EXPECT_EQ(size, 4);
}

}  // namespace
}  // namespace flashserve
