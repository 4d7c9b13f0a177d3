// Every bad input returns a status with a clear message, and writes nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "attention/prefill.h"
#include "decode/decode.h"
#include "tests/support.h"

namespace flashserve::test {
namespace {

Problem small_problem(int block_size) {
  Problem p;
  p.num_heads = 8;
  p.num_kv_heads = 2;
  p.head_dim = 64;
  p.dtype = DType::kBFloat16;
  p.causal = true;
  p.block_size = block_size;
  p.seqs = {{3, 40}, {1, 17}};
  return p;
}

bool untouched(const Problem& p, const Outputs& out) {
  for (int64_t i = 0; i < p.total_q() * p.num_heads * p.head_dim; ++i)
    if (!std::isnan(load_as_float(out.o.data(), p.dtype, i))) return false;
  for (float x : out.lse)
    if (!std::isnan(x)) return false;
  return true;
}

// Applies `breakage` to valid prefill params and expects `code` with `needle` in the message.
void expect_prefill_error(int block_size, const std::function<void(PrefillParams&, ProblemData&)>& breakage,
                          StatusCode code, const std::string& needle) {
  Problem p = small_problem(block_size);
  ProblemData d = make_data(p);
  Outputs out = make_outputs(p);
  PrefillParams pp = prefill_params(p, d, out);
  ASSERT_TRUE(validate_prefill_shapes(pp).ok());
  breakage(pp, d);
  const Status st = prefill(pp);
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << "message: " << st.message();
  EXPECT_TRUE(untouched(p, out)) << "a failed call wrote its outputs";
}

void expect_decode_error(const std::function<void(DecodeParams&, ProblemData&)>& breakage, StatusCode code,
                         const std::string& needle) {
  Problem p = small_problem(16);
  for (auto& s : p.seqs) s.q_len = 2;
  ProblemData d = make_data(p);
  Outputs out = make_outputs(p);
  DecodeParams dp = decode_params(p, d, out);
  breakage(dp, d);
  const Status st = decode(dp);
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << "message: " << st.message();
  EXPECT_TRUE(untouched(p, out)) << "a failed call wrote its outputs";
}

TEST(BadInput, HeadDimZeroIsInvalid) {
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.head_dim = 0; }, StatusCode::kInvalidArgument,
                       "head_dim");
}

TEST(BadInput, HeadDimTooLargeIsUnsupported) {
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.head_dim = 512; }, StatusCode::kUnsupported,
                       "head_dim 512");
}

TEST(BadInput, HeadsNotMultipleOfKvHeads) {
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.num_kv_heads = 3; }, StatusCode::kInvalidArgument,
                       "not a multiple of num_kv_heads");
}

TEST(BadInput, BlockIdOutOfRange) {
  expect_prefill_error(16, [](PrefillParams& p, ProblemData& d) { d.block_table[1] = p.pages.num_blocks; },
                       StatusCode::kOutOfRange, "block_table[0][1]");
  expect_prefill_error(16, [](PrefillParams&, ProblemData& d) { d.block_table[d.table_stride] = -1; },
                       StatusCode::kOutOfRange, "out of range");
}

TEST(BadInput, SeqLenBeyondBlockTable) {
  expect_prefill_error(16, [](PrefillParams& p, ProblemData& d) { d.seq_lens[1] = static_cast<int32_t>(p.pages.block_table_stride * 16 + 1); },
                       StatusCode::kOutOfRange, "beyond its block table");
}

TEST(BadInput, NullPointers) {
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.q = nullptr; }, StatusCode::kInvalidArgument,
                       "q is null");
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.o = nullptr; }, StatusCode::kInvalidArgument,
                       "o is null");
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.cu_seqlens_k = nullptr; },
                       StatusCode::kInvalidArgument, "cu_seqlens_k is null");
  expect_prefill_error(16, [](PrefillParams& p, ProblemData&) { p.pages.block_table = nullptr; },
                       StatusCode::kInvalidArgument, "block_table is null");
}

TEST(BadInput, MisalignedPointers) {
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.k = static_cast<const char*>(p.k) + 1; },
                       StatusCode::kInvalidArgument, "k is not 2-byte aligned");
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(p.lse) + 2); },
                       StatusCode::kInvalidArgument, "lse is not 4-byte aligned");
}

TEST(BadInput, NegativeAndInconsistentLengths) {
  expect_prefill_error(0, [](PrefillParams&, ProblemData& d) { d.cu_seqlens_q[1] = -1; },
                       StatusCode::kInvalidArgument, "cu_seqlens_q decreases");
  expect_prefill_error(0, [](PrefillParams&, ProblemData& d) { d.cu_seqlens_k[2] += 1; },
                       StatusCode::kInvalidArgument, "but the tensor has");
  expect_prefill_error(0, [](PrefillParams&, ProblemData& d) { d.cu_seqlens_q[0] = 1; },
                       StatusCode::kInvalidArgument, "must be 0");
  expect_prefill_error(16, [](PrefillParams&, ProblemData& d) { d.seq_lens[0] = -5; },
                       StatusCode::kInvalidArgument, "negative");
  expect_prefill_error(16, [](PrefillParams&, ProblemData& d) { d.seq_lens[0] = 2; },  // 3 queries
                       StatusCode::kInvalidArgument, "the queries are the last keys");
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.batch = -1; }, StatusCode::kInvalidArgument,
                       "negative");
}

TEST(BadInput, MaskFields) {
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.mask.softmax_scale = NAN; },
                       StatusCode::kInvalidArgument, "softmax_scale");
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.mask.softcap = -1; },
                       StatusCode::kInvalidArgument, "softcap");
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.mask.window_left = -2; },
                       StatusCode::kInvalidArgument, "window");
}

TEST(BadInput, DeviceAndStream) {
  int dummy_stream = 0;
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.device = static_cast<Device>(7); },
                       StatusCode::kInvalidArgument, "device");
  expect_prefill_error(0, [](PrefillParams& p, ProblemData&) { p.dtype = static_cast<DType>(9); },
                       StatusCode::kInvalidArgument, "dtype");
  Problem p = small_problem(0);
  ProblemData d = make_data(p);
  Outputs out = make_outputs(p);
  PrefillParams pp = prefill_params(p, d, out);
  EXPECT_EQ(prefill(pp, &dummy_stream).code(), StatusCode::kInvalidArgument);
}

TEST(BadInput, DecodeQLenOutOfRange) {
  expect_decode_error([](DecodeParams& p, ProblemData&) { p.q_len = 9; }, StatusCode::kInvalidArgument, "q_len = 9");
  expect_decode_error([](DecodeParams& p, ProblemData&) { p.q_len = 0; }, StatusCode::kInvalidArgument, "q_len = 0");
}

TEST(BadInput, DecodeSeqShorterThanNewTokens) {
  expect_decode_error([](DecodeParams&, ProblemData& d) { d.seq_lens[1] = 1; }, StatusCode::kInvalidArgument,
                      "shorter than q_len");
}

TEST(BadInput, DecodeWorkspaceAndPlan) {
  expect_decode_error(
      [](DecodeParams& p, ProblemData&) {
        p.num_splits = 2;
        p.pages_per_split = 2;
        p.workspace = nullptr;
      },
      StatusCode::kInvalidArgument, "workspace is null");
  static float small_ws[16];
  expect_decode_error(
      [](DecodeParams& p, ProblemData&) {
        p.num_splits = 2;
        p.pages_per_split = 2;
        p.workspace = small_ws;
        p.workspace_bytes = sizeof(small_ws);
      },
      StatusCode::kInvalidArgument, "splits need");
  expect_decode_error(
      [](DecodeParams& p, ProblemData&) {
        p.num_splits = 1;
        p.pages_per_split = 1;  // 40 keys = 3 pages of 16
      },
      StatusCode::kInvalidArgument, "does not cover");
  expect_decode_error([](DecodeParams& p, ProblemData& d) { d.block_table[2] = p.pages.num_blocks + 5; },
                      StatusCode::kOutOfRange, "out of range");
}

}  // namespace
}  // namespace flashserve::test
