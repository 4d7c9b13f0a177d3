// The GGUF reader (server/model/gguf.h): dequantization of each supported type against blocks
// packed here from the format's definition; a round trip of every metadata type through the
// writer; each kind of bad file an error naming what is wrong; random byte mutations and
// truncations of a valid file never crash; metadata -> LlamaConfig; a synthetic model written
// as llama.cpp lays it out (Q/K rows permuted) loads back to the same weights and logits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include <unistd.h>

#include "common/dtype.h"
#include "server/model/ggml_quants.h"
#include "server/model/gguf.h"
#include "server/model/gguf_weights.h"
#include "server/model/llama.h"

namespace flashserve::model {
namespace {

void put16(std::vector<uint8_t>* b, uint16_t v) {
  b->push_back(static_cast<uint8_t>(v));
  b->push_back(static_cast<uint8_t>(v >> 8));
}

// Dequantizes `blocks` of `type` and expects exactly `want`.
void expect_dequant(GgmlType type, const std::vector<uint8_t>& blocks, const std::vector<double>& want) {
  std::vector<float> got(want.size(), NAN);
  const Status st = dequantize(type, blocks.data(), static_cast<int64_t>(blocks.size()),
                               static_cast<int64_t>(want.size()), got.data());
  ASSERT_TRUE(st.ok()) << st.to_string();
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_EQ(got[i], static_cast<float>(want[i])) << ggml_type_name(static_cast<uint32_t>(type)) << " element " << i;
}

// The values below are chosen so that every product and sum is exact in fp32: the expected
// values (in double) are the format's definition, with no rounding to argue about.

TEST(GgmlDequant, Float16Bfloat16Float32) {
  const std::vector<double> v = {0.0, -0.0, 1.0, -2.5, 65504.0, 6.103515625e-05, 5.960464477539063e-08, 0.333251953125};
  std::vector<uint8_t> f16, bf16, f32;
  for (double x : v) {
    put16(&f16, float_to_fp16(static_cast<float>(x)));
    put16(&bf16, float_to_bf16(static_cast<float>(x)));
    const uint32_t bits = float_bits(static_cast<float>(x));
    for (int i = 0; i < 4; ++i) f32.push_back(static_cast<uint8_t>(bits >> (8 * i)));
  }
  expect_dequant(GgmlType::kF16, f16, v);
  expect_dequant(GgmlType::kF32, f32, v);
  std::vector<double> vb;
  for (double x : v) vb.push_back(bf16_to_float(float_to_bf16(static_cast<float>(x))));
  expect_dequant(GgmlType::kBF16, bf16, vb);
}

TEST(GgmlDequant, Q8_0) {
  std::vector<uint8_t> b;
  std::vector<double> want;
  const double d[2] = {0.5, -0.0078125};
  for (int blk = 0; blk < 2; ++blk) {
    put16(&b, float_to_fp16(static_cast<float>(d[blk])));
    for (int j = 0; j < 32; ++j) {
      const int q = blk == 0 ? -128 + 8 * j : 127 - 8 * j;  // the int8 extremes and between
      b.push_back(static_cast<uint8_t>(static_cast<int8_t>(q)));
      want.push_back(q * d[blk]);
    }
  }
  expect_dequant(GgmlType::kQ8_0, b, want);
}

TEST(GgmlDequant, Q4_0AndQ4_1) {
  // One block each: element j < 16 in the low nibble of qs[j], element j + 16 in its high nibble.
  std::vector<uint8_t> b0, b1;
  std::vector<double> want0(32), want1(32);
  const double d = 0.25, m = -1.5;
  put16(&b0, float_to_fp16(static_cast<float>(d)));
  put16(&b1, float_to_fp16(static_cast<float>(d)));
  put16(&b1, float_to_fp16(static_cast<float>(m)));
  for (int j = 0; j < 16; ++j) {
    const int lo = j, hi = 15 - (j * 7) % 16;
    const uint8_t byte = static_cast<uint8_t>(lo | (hi << 4));
    b0.push_back(byte);
    b1.push_back(byte);
    want0[j] = d * (lo - 8);
    want0[j + 16] = d * (hi - 8);
    want1[j] = d * lo + m;
    want1[j + 16] = d * hi + m;
  }
  expect_dequant(GgmlType::kQ4_0, b0, want0);
  expect_dequant(GgmlType::kQ4_1, b1, want1);
}

TEST(GgmlDequant, Q4_K) {
  // Packed as llama.cpp's quantize_row_q4_K_ref packs: six-bit scales ls[8] and mins lm[8] into
  // 12 bytes, 4-bit quants L[256] as qs[l] = L[j + l] | L[j + l + 32] << 4 per 64 elements.
  const double d = 0.5, dmin = 0.125;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>((5 + 17 * j) % 64);  // values above 15 need the high bits
    lm[j] = static_cast<uint8_t>((63 - 11 * j + 64) % 64);
  }
  uint8_t scales[12] = {};
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      scales[j] = ls[j];
      scales[j + 4] = lm[j];
    } else {
      scales[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      scales[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      scales[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
  uint8_t L[256];
  for (int i = 0; i < 256; ++i) L[i] = static_cast<uint8_t>((i * 7 + i / 32) % 16);
  std::vector<uint8_t> b;
  put16(&b, float_to_fp16(static_cast<float>(d)));
  put16(&b, float_to_fp16(static_cast<float>(dmin)));
  b.insert(b.end(), scales, scales + 12);
  for (int j = 0; j < 256; j += 64)
    for (int l = 0; l < 32; ++l) b.push_back(static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4)));
  ASSERT_EQ(b.size(), 144u);
  std::vector<double> want(256);
  for (int i = 0; i < 256; ++i) want[i] = d * ls[i / 32] * L[i] - dmin * lm[i / 32];
  expect_dequant(GgmlType::kQ4_K, b, want);
}

TEST(GgmlDequant, Q6_K) {
  // Packed as llama.cpp's quantize_row_q6_K_ref packs: L[256] in 0..63 (q + 32), per 128:
  // ql[l] = L[l] & 15 | (L[l + 64] & 15) << 4, ql[l + 32] likewise for l + 32 and l + 96,
  // qh[l] = the four high 2-bit parts of L[l], L[l + 32], L[l + 64], L[l + 96]; int8 scale per 16.
  const double d = 0.0625;
  int8_t sc[16];
  for (int i = 0; i < 16; ++i) sc[i] = static_cast<int8_t>(i % 2 ? -(3 * i + 1) : 127 - 9 * i);
  uint8_t L[256];
  for (int i = 0; i < 256; ++i) L[i] = static_cast<uint8_t>((i * 13 + 5) % 64);
  uint8_t ql[128] = {}, qh[64] = {};
  for (int j = 0, o_ql = 0, o_qh = 0; j < 256; j += 128, o_ql += 64, o_qh += 32) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
      ql[o_ql + l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[o_ql + l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[o_qh + l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                          ((L[j + l + 96] >> 4) << 6));
    }
  }
  std::vector<uint8_t> b(ql, ql + 128);
  b.insert(b.end(), qh, qh + 64);
  for (int8_t s : sc) b.push_back(static_cast<uint8_t>(s));
  put16(&b, float_to_fp16(static_cast<float>(d)));
  ASSERT_EQ(b.size(), 210u);
  std::vector<double> want(256);
  for (int i = 0; i < 256; ++i) want[i] = d * sc[i / 16] * (L[i] - 32);
  expect_dequant(GgmlType::kQ6_K, b, want);
}

TEST(GgmlDequant, RefusesWhatItCannot) {
  std::vector<uint8_t> b(176);
  std::vector<float> out(256);
  Status st = dequantize(GgmlType::kQ5_K, b.data(), 176, 256, out.data());
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("Q5_K"), std::string::npos) << st.message();
  st = dequantize(GgmlType::kQ8_0, b.data(), 34, 31, out.data());  // not a whole block
  EXPECT_FALSE(st.ok());
  st = dequantize(GgmlType::kQ8_0, b.data(), 33, 32, out.data());  // a byte short
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ggml_type_name(4), "type 4");  // Q4_2, removed from ggml
  EXPECT_EQ(ggml_type_traits(9).name, nullptr);  // Q8_1: not a storage type
}

// ---------------------------------------------------------------------------------- the container

// A small valid file with every metadata type and a tensor of several types.
GgufWriter small_writer() {
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  w.set_u8("t.u8", 200);
  w.set_i8("t.i8", -100);
  w.set_u16("t.u16", 60000);
  w.set_i16("t.i16", -30000);
  w.set_u32("t.u32", 4000000000u);
  w.set_i32("t.i32", -2000000000);
  w.set_u64("t.u64", 18000000000000000000ull);
  w.set_i64("t.i64", -9000000000000000000ll);
  w.set_f32("t.f32", 0.1f);
  w.set_f64("t.f64", 1e300);
  w.set_bool("t.bool", true);
  w.set_string("t.str", std::string("h\0llo", 5));
  w.set_string_array("t.strs", {"a", "", "Ġthe", std::string(300, 'x')});
  w.set_i32_array("t.i32s", {1, -2, 3});
  const uint16_t u16s[3] = {1, 2, 65535};
  w.set_array("t.u16s", GgufValueType::kUint16, u16s, 3);
  const int64_t big[2] = {int64_t{1} << 40, -1};
  w.set_array("t.i64s", GgufValueType::kInt64, big, 2);
  w.set_f32_array("t.f32s", {0.5f, -1.f});
  const double f64s[2] = {0.25, 1e-3};
  w.set_array("t.f64s", GgufValueType::kFloat64, f64s, 2);
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  w.add_tensor_f32("a.f32", {2, 3}, v.data());
  w.add_tensor_f32("b.f16", {3, 2}, v.data(), GgmlType::kF16);
  std::vector<uint8_t> q8;  // two Q8_0 blocks: one row of 64
  for (int blk = 0; blk < 2; ++blk) {
    put16(&q8, float_to_fp16(0.5f));
    for (int j = 0; j < 32; ++j) q8.push_back(static_cast<uint8_t>(j - 16));
  }
  w.add_tensor("c.q8", GgmlType::kQ8_0, {64, 1}, q8.data(), q8.size());
  return w;
}

Status parse(const std::vector<uint8_t>& bytes, GgufFile* f) { return GgufFile::parse(bytes, "test.gguf", f); }

TEST(Gguf, RoundTripEveryType) {
  for (uint32_t version : {2u, 3u}) {
    GgufFile f;
    const Status st = parse(small_writer().serialize(version), &f);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(f.version(), version);
    EXPECT_EQ(f.alignment(), 32u);
    EXPECT_EQ(f.data_offset() % 32, 0u);
    uint32_t u32;
    int32_t i32;
    uint64_t u64;
    int64_t i64;
    float f32;
    double f64;
    bool b;
    std::string s;
    ASSERT_TRUE(f.get_u32("t.u8", &u32).ok());
    EXPECT_EQ(u32, 200u);
    ASSERT_TRUE(f.get_i32("t.i8", &i32).ok());
    EXPECT_EQ(i32, -100);
    ASSERT_TRUE(f.get_u32("t.u16", &u32).ok());
    EXPECT_EQ(u32, 60000u);
    ASSERT_TRUE(f.get_i32("t.i16", &i32).ok());
    EXPECT_EQ(i32, -30000);
    ASSERT_TRUE(f.get_u32("t.u32", &u32).ok());
    EXPECT_EQ(u32, 4000000000u);
    ASSERT_TRUE(f.get_i32("t.i32", &i32).ok());
    EXPECT_EQ(i32, -2000000000);
    ASSERT_TRUE(f.get_u64("t.u64", &u64).ok());
    EXPECT_EQ(u64, 18000000000000000000ull);
    ASSERT_TRUE(f.get_i64("t.i64", &i64).ok());
    EXPECT_EQ(i64, -9000000000000000000ll);
    ASSERT_TRUE(f.get_f32("t.f32", &f32).ok());
    EXPECT_EQ(f32, 0.1f);
    ASSERT_TRUE(f.get_f64("t.f64", &f64).ok());
    EXPECT_EQ(f64, 1e300);
    ASSERT_TRUE(f.get_bool("t.bool", &b).ok());
    EXPECT_TRUE(b);
    ASSERT_TRUE(f.get_string("t.str", &s).ok());
    EXPECT_EQ(s, std::string("h\0llo", 5));
    std::vector<std::string> strs;
    ASSERT_TRUE(f.get_string_array("t.strs", &strs).ok());
    EXPECT_EQ(strs, (std::vector<std::string>{"a", "", "Ġthe", std::string(300, 'x')}));
    std::vector<std::string_view> views;
    ASSERT_TRUE(f.get_string_array_views("t.strs", &views).ok());
    ASSERT_EQ(views.size(), 4u);
    EXPECT_EQ(views[2], "Ġthe");
    std::vector<int32_t> ints;
    ASSERT_TRUE(f.get_i32_array("t.i32s", &ints).ok());
    EXPECT_EQ(ints, (std::vector<int32_t>{1, -2, 3}));
    ASSERT_TRUE(f.get_i32_array("t.u16s", &ints).ok());
    EXPECT_EQ(ints, (std::vector<int32_t>{1, 2, 65535}));
    std::vector<int64_t> longs;
    ASSERT_TRUE(f.get_i64_array("t.i64s", &longs).ok());
    EXPECT_EQ(longs, (std::vector<int64_t>{int64_t{1} << 40, -1}));
    std::vector<float> floats;
    ASSERT_TRUE(f.get_f32_array("t.f32s", &floats).ok());
    EXPECT_EQ(floats, (std::vector<float>{0.5f, -1.f}));
    ASSERT_TRUE(f.get_f32_array("t.f64s", &floats).ok());
    EXPECT_EQ(floats, (std::vector<float>{0.25f, 1e-3f}));
    ASSERT_EQ(f.tensors().size(), 3u);
    EXPECT_EQ(f.tensor("a.f32")->dims, (std::vector<int64_t>{3, 2}));
    EXPECT_EQ(f.tensor("a.f32")->shape(), (std::vector<int64_t>{2, 3}));
    std::vector<float> out;
    ASSERT_TRUE(f.read_f32("a.f32", {2, 3}, &out).ok());
    EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    ASSERT_TRUE(f.read_f32("b.f16", {3, 2}, &out).ok());
    EXPECT_EQ(out, (std::vector<float>{1, 2, 3, 4, 5, 6}));
    ASSERT_TRUE(f.read_f32("c.q8", {1, 64}, &out).ok());
    for (int i = 0; i < 64; ++i) EXPECT_EQ(out[i], 0.5f * ((i % 32) - 16));
    for (const GgufTensorInfo& t : f.tensors()) EXPECT_EQ((f.data_offset() + t.offset) % 32, 0u) << t.name;
  }
}

TEST(Gguf, GettersRefuseWrongTypesAndRanges) {
  GgufFile f;
  ASSERT_TRUE(parse(small_writer().serialize(), &f).ok());
  uint32_t u32;
  int32_t i32;
  float f32;
  bool b;
  std::string s;
  std::vector<std::string> strs;
  std::vector<int32_t> ints;
  auto expect_error = [](const Status& st, const std::string& needle) {
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
  };
  expect_error(f.get_u32("t.str", &u32), "t.str is STRING, not an integer");
  expect_error(f.get_string("t.u32", &s), "t.u32 is UINT32, not STRING");
  expect_error(f.get_bool("t.u8", &b), "not BOOL");
  expect_error(f.get_f32("t.i32", &f32), "not a float");
  expect_error(f.get_u32("t.i8", &u32), "does not fit");          // negative as unsigned
  expect_error(f.get_i32("t.u32", &i32), "does not fit");         // 4e9 as int32
  expect_error(f.get_u32("t.u64", &u32), "does not fit");
  expect_error(f.get_string_array("t.i32s", &strs), "ARRAY of INT32, not an ARRAY of STRING");
  expect_error(f.get_i32_array("t.strs", &ints), "not an ARRAY of integers");
  expect_error(f.get_i32_array("t.u32", &ints), "UINT32, not an ARRAY");
  expect_error(f.get_i32_array("t.i64s", &ints), "element 0 does not fit");
  expect_error(f.get_u32("no.such.key", &u32), "no metadata key no.such.key");
  std::vector<float> out;
  expect_error(f.read_f32("a.f32", {3, 2}, &out), "has shape [2, 3] (outermost first), expected [3, 2]");
  expect_error(f.read_f32("nope", {1}, &out), "no tensor nope");
}

TEST(Gguf, AlignmentFromMetadata) {
  GgufWriter w = small_writer();
  w.set_alignment(256);
  GgufFile f;
  ASSERT_TRUE(parse(w.serialize(), &f).ok());
  EXPECT_EQ(f.alignment(), 256u);
  EXPECT_EQ(f.data_offset() % 256, 0u);
  std::vector<float> out;
  ASSERT_TRUE(f.read_f32("b.f16", {3, 2}, &out).ok());
  EXPECT_EQ(out[5], 6.f);
  GgufWriter bad;
  bad.set_alignment(48);
  Status st = parse(bad.serialize(), &f);
  EXPECT_NE(st.message().find("general.alignment 48 is not a power of two"), std::string::npos) << st.message();
  GgufWriter bad_type;
  bad_type.set_u64("general.alignment", 64);
  st = parse(bad_type.serialize(), &f);
  EXPECT_NE(st.message().find("general.alignment is UINT64, not UINT32"), std::string::npos) << st.message();
}

TEST(Gguf, OpensAFileByMapping) {
  const auto path = std::filesystem::temp_directory_path() / ("flashserve_gguf_" + std::to_string(::getpid()) + ".gguf");
  ASSERT_TRUE(small_writer().write(path.string()).ok());
  GgufFile f;
  Status st = GgufFile::open(path.string(), &f);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::vector<std::string_view> views;
  ASSERT_TRUE(f.get_string_array_views("t.strs", &views).ok());
  GgufFile copy = f;  // views stay valid through copies (one shared mapping)
  f = GgufFile();
  EXPECT_EQ(views[2], "Ġthe");
  EXPECT_EQ(copy.tensors().size(), 3u);
  std::filesystem::remove(path);
  st = GgufFile::open(path.string(), &f);
  EXPECT_NE(st.message().find("cannot open"), std::string::npos) << st.message();
  st = GgufFile::open(std::filesystem::temp_directory_path().string(), &f);
  EXPECT_NE(st.message().find("not a regular file"), std::string::npos) << st.message();
}

// ------------------------------------------------------------------------------------ bad files

// Where `needle` (a key's or tensor's name, as the file stores it: u64 length then bytes) ends.
size_t after_name(const std::vector<uint8_t>& b, const std::string& needle) {
  for (size_t i = 8; i + needle.size() <= b.size(); ++i)
    if (std::memcmp(&b[i], needle.data(), needle.size()) == 0 && b[i - 8] == needle.size()) return i + needle.size();
  ADD_FAILURE() << needle << " not in the file";
  return 0;
}
void poke64(std::vector<uint8_t>* b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
void poke32(std::vector<uint8_t>* b, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*b)[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

void expect_bad(const std::vector<uint8_t>& bytes, const std::string& needle, StatusCode code = StatusCode::kInvalidArgument) {
  GgufFile f;
  const Status st = parse(bytes, &f);
  EXPECT_EQ(st.code(), code) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << "wanted '" << needle << "' in: " << st.message();
}

TEST(GgufBadFile, HeaderMagicAndVersion) {
  std::vector<uint8_t> b = small_writer().serialize();
  std::vector<uint8_t> m = b;
  m[0] = 'X';
  expect_bad(m, "bad magic 'XGUF'");
  expect_bad({}, "bad magic ''");
  expect_bad({'G', 'G', 'U'}, "bad magic 'GGU'");
  m = b;
  poke32(&m, 4, 1);
  expect_bad(m, "GGUF version 1", StatusCode::kUnsupported);
  poke32(&m, 4, 7);
  expect_bad(m, "unknown GGUF version 7");
  poke32(&m, 4, 0x03000000);
  expect_bad(m, "big-endian", StatusCode::kUnsupported);
  m = b;
  poke64(&m, 8, uint64_t{1} << 60);  // tensor count
  expect_bad(m, "(the header's tensor count 1152921504606846976 is more than the");
  m = b;
  poke64(&m, 16, ~uint64_t{0});  // metadata count
  expect_bad(m, "(the header's metadata count 18446744073709551615 is more than the");
}

TEST(GgufBadFile, TruncatedAtEveryByte) {
  const std::vector<uint8_t> b = small_writer().serialize();
  int truncated = 0, past_end = 0, magic = 0;
  for (size_t n = 0; n < b.size(); ++n) {
    GgufFile f;
    const Status st = parse(std::vector<uint8_t>(b.begin(), b.begin() + n), &f);
    ASSERT_FALSE(st.ok()) << "a file cut to " << n << " of " << b.size() << " bytes parsed";
    const std::string& msg = st.message();
    if (msg.find("truncated") != std::string::npos) ++truncated;
    else if (msg.find("past the end") != std::string::npos) ++past_end;
    else if (msg.find("bad magic") != std::string::npos) ++magic;
    else ADD_FAILURE() << "cut to " << n << ": " << msg;
  }
  EXPECT_EQ(magic, 4);
  EXPECT_GT(truncated, 0);
  EXPECT_GT(past_end, 0);
  // A few sections by name.
  auto cut = [&](size_t n) { return std::vector<uint8_t>(b.begin(), b.begin() + n); };
  expect_bad(cut(6), "truncated: the version at offset 4");
  expect_bad(cut(20), "truncated: the metadata count at offset 16");
  expect_bad(cut(after_name(b, "t.u32") + 2), "truncated: the value type of metadata key 't.u32'");
  expect_bad(cut(after_name(b, "t.u32") + 6), "truncated: the value of metadata key 't.u32'");
  expect_bad(cut(after_name(b, "c.q8") + 3), "truncated: the dimension count of tensor 'c.q8'");
  expect_bad(cut(b.size() - 1), "tensor 'c.q8' has data [");
}

TEST(GgufBadFile, LyingLengthsAndOffsets) {
  const std::vector<uint8_t> b = small_writer().serialize();
  std::vector<uint8_t> m = b;
  poke64(&m, after_name(b, "t.strs") + 8, uint64_t{1} << 61);  // after the type and element type
  expect_bad(m, "metadata key 't.strs' claims 2305843009213693952 strings, past the end");
  m = b;
  poke64(&m, after_name(b, "t.i32s") + 8, uint64_t{1} << 62);
  expect_bad(m, "metadata key 't.i32s' claims 4611686018427387904 INT32 elements, past the end");
  m = b;
  poke64(&m, after_name(b, "t.str") + 4, 1000000);  // the string's own length
  expect_bad(m, "the value of metadata key 't.str' at offset");
  m = b;
  poke64(&m, after_name(b, "t.str") - 5 - 8, ~uint64_t{0} - 3);  // the key's length
  expect_bad(m, "past the end of the file");
  // Tensor info: name | n_dims u32 | dims u64... | type u32 | offset u64.
  const size_t q8 = after_name(b, "c.q8");  // 2 dims
  m = b;
  poke64(&m, q8 + 4 + 16 + 4, 4096);
  expect_bad(m, "tensor 'c.q8' has data [4096, +68) past the end");
  m = b;
  poke64(&m, q8 + 4 + 16 + 4, 33);
  expect_bad(m, "tensor 'c.q8' has data offset 33, not a multiple of the alignment 32");
  m = b;
  poke64(&m, q8 + 4 + 16 + 4, 0);  // onto a.f32
  expect_bad(m, "overlaps");
  m = b;
  poke64(&m, q8 + 4 + 16 + 4, ~uint64_t{0} - 31);  // offset + bytes wraps around
  expect_bad(m, "past the end");
}

TEST(GgufBadFile, TypesAndShapes) {
  const std::vector<uint8_t> b = small_writer().serialize();
  std::vector<uint8_t> m = b;
  poke32(&m, after_name(b, "t.u32"), 13);
  expect_bad(m, "metadata key 't.u32' has unknown value type 13");
  m = b;
  poke32(&m, after_name(b, "t.i32s") + 4, 99);
  expect_bad(m, "metadata key 't.i32s' is an array of unknown element type 99");
  m = b;
  poke32(&m, after_name(b, "t.i32s") + 4, 9);
  expect_bad(m, "array of arrays", StatusCode::kUnsupported);
  m = b;
  m[after_name(b, "t.bool") + 4] = 2;
  expect_bad(m, "metadata key 't.bool' is a BOOL holding 2");
  const size_t q8 = after_name(b, "c.q8");
  m = b;
  poke32(&m, q8 + 4 + 16, 77);
  expect_bad(m, "tensor 'c.q8' has unknown ggml type 77");
  m = b;
  poke32(&m, q8 + 4 + 16, 4);
  expect_bad(m, "unknown ggml type 4");
  m = b;
  poke64(&m, q8 + 4, 48);  // a Q8_0 row of 48 elements
  expect_bad(m, "tensor 'c.q8' (Q8_0) has rows of 48 elements, not a multiple of its block of 32");
  m = b;
  poke64(&m, q8 + 4 + 8, 0);
  expect_bad(m, "tensor 'c.q8' has a zero-size dimension 1");
  m = b;
  poke32(&m, q8, 0);
  expect_bad(m, "tensor 'c.q8' has 0 dims");

  // Shapes the writer makes directly.
  const float x[1] = {1};
  GgufWriter five;
  five.add_tensor("t5", GgmlType::kF32, {1, 1, 1, 1, 1}, x, 4);
  expect_bad(five.serialize(), "tensor 't5' has 5 dims (1 to 4 are allowed)");
  GgufWriter huge;
  huge.add_tensor("big", GgmlType::kF32, {int64_t{1} << 32, int64_t{1} << 32}, x, 4);
  expect_bad(huge.serialize(), "tensor 'big''s shape overflows (dimension 1 is 4294967296)");
  GgufWriter neg;
  neg.add_tensor("neg", GgmlType::kF32, {-1}, x, 4);
  expect_bad(neg.serialize(), "tensor 'neg''s shape overflows (dimension 0 is 18446744073709551615)");
  GgufWriter bytes_wrap;  // numel fits int64, bytes do not fit uint64
  bytes_wrap.add_tensor("w", GgmlType::kF64, {int64_t{1} << 62}, x, 4);
  expect_bad(bytes_wrap.serialize(), "tensor 'w''s byte size overflows");
  GgufWriter dup;
  dup.set_u32("k", 1);
  dup.set_u32("k", 2);
  expect_bad(dup.serialize(), "metadata key 'k' appears twice");
  GgufWriter dup_t;
  dup_t.add_tensor("t", GgmlType::kF32, {1}, x, 4);
  dup_t.add_tensor("t", GgmlType::kF32, {1}, x, 4);
  expect_bad(dup_t.serialize(), "tensor 't' appears twice");
}

TEST(GgufBadFile, UnsupportedTensorTypeIsNamedOnRead) {
  GgufWriter w;
  std::vector<uint8_t> q5k(176, 0);
  w.add_tensor("w.q5k", GgmlType::kQ5_K, {256}, q5k.data(), q5k.size());
  GgufFile f;
  ASSERT_TRUE(parse(w.serialize(), &f).ok());
  std::vector<float> out;
  const Status st = f.read_f32("w.q5k", {256}, &out);
  EXPECT_EQ(st.code(), StatusCode::kUnsupported);
  EXPECT_NE(st.message().find("tensor w.q5k has ggml type Q5_K"), std::string::npos) << st.message();
}

// Every getter and every tensor of a file that parsed: nothing may read out of bounds.
void exercise(const GgufFile& f) {
  for (const GgufKV& kv : f.metadata()) {
    uint32_t u32; int32_t i32; uint64_t u64; int64_t i64; float f32; double f64; bool b; std::string s;
    std::vector<std::string> strs; std::vector<int32_t> ints; std::vector<int64_t> longs; std::vector<float> floats;
    (void)f.get_u32(kv.key, &u32); (void)f.get_i32(kv.key, &i32); (void)f.get_u64(kv.key, &u64);
    (void)f.get_i64(kv.key, &i64); (void)f.get_f32(kv.key, &f32); (void)f.get_f64(kv.key, &f64);
    (void)f.get_bool(kv.key, &b); (void)f.get_string(kv.key, &s); (void)f.get_string_array(kv.key, &strs);
    (void)f.get_i32_array(kv.key, &ints); (void)f.get_i64_array(kv.key, &longs); (void)f.get_f32_array(kv.key, &floats);
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    std::vector<float> out;
    if (t.numel() <= (1 << 20)) (void)f.read_f32(t.name, t.shape(), &out);
  }
  LlamaConfig c;
  (void)gguf_llama_config(f, &c);
}

TEST(GgufFuzz, RandomMutationsAndTruncationsNeverCrash) {
  // A file with a tokenizer-like string array and quantized tensors.
  GgufWriter w = small_writer();
  w.set_alignment(32);
  std::vector<std::string> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back("tok" + std::to_string(i));
  w.set_string_array("tokenizer.ggml.tokens", tokens);
  std::vector<uint8_t> q4k(144, 0x5a), q6k(210, 0xa5), q41(40, 0x33);
  w.add_tensor("d.q4k", GgmlType::kQ4_K, {256}, q4k.data(), q4k.size());
  w.add_tensor("e.q6k", GgmlType::kQ6_K, {256}, q6k.data(), q6k.size());
  w.add_tensor("f.q41", GgmlType::kQ4_1, {32, 2}, q41.data(), q41.size());
  const std::vector<uint8_t> base = w.serialize();
  GgufFile check;
  ASSERT_TRUE(parse(base, &check).ok());
  std::mt19937_64 rng(20240523);
  int parsed = 0, rejected = 0;
  const uint8_t special[] = {0x00, 0xff, 0x7f, 0x80, 0x01, 0x20, 0x09, 0x08};
  for (int iter = 0; iter < 4000; ++iter) {
    std::vector<uint8_t> m = base;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % m.size();
      m[at] = (rng() % 2) ? static_cast<uint8_t>(rng()) : special[rng() % sizeof special];
    }
    if (iter % 4 == 3) m.resize(rng() % m.size());  // and cut it somewhere
    GgufFile f;
    const Status st = parse(m, &f);
    if (st.ok()) {
      ++parsed;
      exercise(f);
    } else {
      ++rejected;
      EXPECT_FALSE(st.message().empty());
    }
  }
  for (int iter = 0; iter < 1000; ++iter) {
    GgufFile f;
    const size_t n = rng() % base.size();
    EXPECT_FALSE(parse(std::vector<uint8_t>(base.begin(), base.begin() + n), &f).ok()) << "cut to " << n;
  }
  std::printf("fuzz: %d mutated files parsed (and were read through every getter), %d rejected\n", parsed, rejected);
  EXPECT_GT(parsed, 100);  // mutations of tensor data and values mostly still parse
  EXPECT_GT(rejected, 100);
}

// ------------------------------------------------------------------------ config and weights

LlamaConfig tiny_config() {
  LlamaConfig c;
  EXPECT_TRUE(synthetic_preset("tiny", &c).ok());
  c.rms_norm_eps = 1e-5f;   // values a float32 key holds exactly
  c.rope_theta = 100000.0;
  c.max_position_embeddings = 8192;
  return c;
}

TEST(GgufConfig, ReadsLlamaMetadata) {
  const LlamaConfig c = tiny_config();
  LlamaWeights w;
  ASSERT_TRUE(synthetic_weights(c, 5, &w).ok());
  GgufWriter g;
  add_gguf_model(&g, c, w);
  GgufFile f;
  ASSERT_TRUE(parse(g.serialize(), &f).ok());
  LlamaConfig got;
  const Status st = gguf_llama_config(f, &got);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(got.vocab_size, c.vocab_size);
  EXPECT_EQ(got.hidden_size, c.hidden_size);
  EXPECT_EQ(got.intermediate_size, c.intermediate_size);
  EXPECT_EQ(got.num_hidden_layers, c.num_hidden_layers);
  EXPECT_EQ(got.num_attention_heads, c.num_attention_heads);
  EXPECT_EQ(got.num_key_value_heads, c.num_key_value_heads);
  EXPECT_EQ(got.head_dim, c.head_dim);
  EXPECT_EQ(got.rms_norm_eps, c.rms_norm_eps);
  EXPECT_EQ(got.rope_theta, c.rope_theta);
  EXPECT_EQ(got.max_position_embeddings, 8192);
  EXPECT_EQ(got.eos_token_ids, c.eos_token_ids);
  EXPECT_FALSE(got.tie_word_embeddings);  // the synthetic preset has an lm_head: output.weight written
}

// The tiny model's metadata plus or minus keys, tensors left out.
Status config_with(const std::function<void(GgufWriter*)>& edit, LlamaConfig* out, bool base_keys = true) {
  GgufWriter g;
  if (base_keys) {
    g.set_string("general.architecture", "llama");
    g.set_u32("llama.block_count", 2);
    g.set_u32("llama.embedding_length", 128);
    g.set_u32("llama.feed_forward_length", 344);
    g.set_u32("llama.attention.head_count", 4);
    g.set_u32("llama.attention.head_count_kv", 2);
    g.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
    g.set_u32("llama.context_length", 4096);
  }
  edit(&g);
  GgufFile f;
  FS_RETURN_IF_ERROR(GgufFile::parse(g.serialize(), "cfg.gguf", &f));
  return gguf_llama_config(f, out);
}

TEST(GgufConfig, DefaultsVocabFromTokensAndRefusals) {
  LlamaConfig c;
  Status st = config_with([](GgufWriter* g) { g->set_string_array("tokenizer.ggml.tokens", {"a", "b", "c"}); }, &c);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(c.vocab_size, 3);
  EXPECT_EQ(c.head_dim, 32);            // embedding_length / head_count
  EXPECT_EQ(c.rope_theta, 10000.0);     // llama.cpp's default
  EXPECT_TRUE(c.tie_word_embeddings);   // no output.weight
  EXPECT_TRUE(c.eos_token_ids.empty());
  auto refused = [&](const std::function<void(GgufWriter*)>& edit, const std::string& needle,
                     StatusCode code = StatusCode::kUnsupported, bool base = true) {
    LlamaConfig out;
    const Status s = config_with(edit, &out, base);
    EXPECT_EQ(s.code(), code) << s.to_string();
    EXPECT_NE(s.message().find(needle), std::string::npos) << "wanted '" << needle << "' in: " << s.message();
  };
  auto vocab = [](GgufWriter* g) { g->set_u32("llama.vocab_size", 512); };
  refused([&](GgufWriter* g) { vocab(g); g->set_string("llama.rope.scaling.type", "linear"); },
          "llama.rope.scaling.type 'linear' is not supported");
  refused([&](GgufWriter* g) { vocab(g); g->set_string("llama.rope.scaling.type", "yarn"); }, "'yarn'");
  refused([&](GgufWriter* g) { vocab(g); g->set_f32("llama.rope.scaling.factor", 8.f); }, "rope.scaling.factor");
  refused([&](GgufWriter* g) { vocab(g); g->set_u32("llama.rope.dimension_count", 16); }, "partial rotary");
  refused([&](GgufWriter* g) { vocab(g); g->set_u32("llama.expert_count", 8); }, "MoE");
  refused([&](GgufWriter* g) { vocab(g); g->set_u32("llama.attention.value_length", 16); }, "value_length");
  refused([&](GgufWriter* g) {
    vocab(g);
    const float one = 1;
    g->add_tensor("rope_freqs.weight", GgmlType::kF32, {1}, &one, 4);
  }, "rope_freqs.weight");
  refused([](GgufWriter* g) { g->set_string("general.architecture", "qwen2"); },
          "general.architecture is 'qwen2'; only llama is supported", StatusCode::kUnsupported, false);
  refused([](GgufWriter*) {}, "no metadata key general.architecture", StatusCode::kInvalidArgument, false);
  refused([](GgufWriter*) {}, "neither llama.vocab_size nor tokenizer.ggml.tokens", StatusCode::kInvalidArgument);
  refused([&](GgufWriter* g) { vocab(g); g->set_u32("llama.attention.key_length", 33); },
          "head_dim must be even", StatusCode::kInvalidArgument);
  refused([&](GgufWriter* g) { vocab(g); g->set_string("tokenizer.ggml.eos_token_id", "2"); },
          "tokenizer.ggml.eos_token_id is STRING, not an integer", StatusCode::kInvalidArgument);
}

// Weights written as llama.cpp lays them out (Q/K rows permuted, GGUF names, dims innermost
// first) load back to the Hugging Face layout exactly; the forward gives the same logits.
TEST(GgufWeights, SyntheticModelRoundTrip) {
  for (bool tied : {false, true}) {
    LlamaConfig c = tiny_config();
    c.tie_word_embeddings = tied;
    LlamaWeights w;
    ASSERT_TRUE(synthetic_weights(c, 11, &w).ok());
    const auto path = std::filesystem::temp_directory_path() /
                      ("flashserve_gguf_model_" + std::to_string(::getpid()) + (tied ? "_tied" : "") + ".gguf");
    ASSERT_TRUE(write_gguf_model(path.string(), c, w).ok());
    EXPECT_TRUE(is_gguf_file(path.string()));
    LlamaConfig c2;
    LlamaWeights w2;
    const Status st = load_gguf_model(path.string(), &c2, &w2);
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(c2.tie_word_embeddings, tied);
    EXPECT_EQ(w2.embed, w.embed);
    EXPECT_EQ(w2.lm_head, w.lm_head);
    EXPECT_EQ(w2.final_norm, w.final_norm);
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      EXPECT_EQ(w2.layers[l].wq, w.layers[l].wq) << "layer " << l;
      EXPECT_EQ(w2.layers[l].wk, w.layers[l].wk) << "layer " << l;
      EXPECT_EQ(w2.layers[l].wv, w.layers[l].wv);
      EXPECT_EQ(w2.layers[l].wo, w.layers[l].wo);
      EXPECT_EQ(w2.layers[l].w_gate, w.layers[l].w_gate);
      EXPECT_EQ(w2.layers[l].w_up, w.layers[l].w_up);
      EXPECT_EQ(w2.layers[l].w_down, w.layers[l].w_down);
      EXPECT_EQ(w2.layers[l].input_norm, w.layers[l].input_norm);
      EXPECT_EQ(w2.layers[l].post_norm, w.layers[l].post_norm);
    }
    // The file really holds permuted rows: Q read raw differs from HF order.
    GgufFile f;
    ASSERT_TRUE(GgufFile::open(path.string(), &f).ok());
    std::vector<float> raw_q;
    ASSERT_TRUE(f.read_f32("blk.0.attn_q.weight", {c.num_attention_heads * c.head_dim, c.hidden_size}, &raw_q).ok());
    EXPECT_NE(raw_q, w.layers[0].wq);
    gguf_unpermute_qk_rows(&raw_q, c.num_attention_heads, c.head_dim, c.hidden_size);
    EXPECT_EQ(raw_q, w.layers[0].wq);
    std::filesystem::remove(path);

    LlamaModel a, b;
    ASSERT_TRUE(LlamaModel::create(c, w, 16, 16, &a).ok());
    ASSERT_TRUE(LlamaModel::create(c2, std::move(w2), 16, 16, &b).ok());
    std::vector<float> la, lb;
    ASSERT_TRUE(a.reference_forward({1, 7, 300, 42, 9}, &la).ok());
    ASSERT_TRUE(b.reference_forward({1, 7, 300, 42, 9}, &lb).ok());
    EXPECT_EQ(la, lb);
  }
}

TEST(GgufWeights, HalfPrecisionStorageAndMissingTensors) {
  const LlamaConfig c = tiny_config();
  LlamaWeights w;
  ASSERT_TRUE(synthetic_weights(c, 12, &w).ok());
  for (GgmlType t : {GgmlType::kF16, GgmlType::kBF16}) {
    GgufWriter g;
    add_gguf_model(&g, c, w, t);
    GgufFile f;
    ASSERT_TRUE(parse(g.serialize(), &f).ok());
    LlamaConfig c2;
    ASSERT_TRUE(gguf_llama_config(f, &c2).ok());
    LlamaWeights w2;
    const Status st = load_gguf_weights(f, c2, &w2);
    ASSERT_TRUE(st.ok()) << st.to_string();
    for (size_t i = 0; i < w.embed.size(); i += 97) {
      const float want = t == GgmlType::kF16 ? fp16_to_float(float_to_fp16(w.embed[i]))
                                             : bf16_to_float(float_to_bf16(w.embed[i]));
      ASSERT_EQ(w2.embed[i], want) << i;
    }
    EXPECT_EQ(w2.layers[1].post_norm, w.layers[1].post_norm);  // norms stay F32
  }
  // A model whose file lacks a layer's tensor, or has it in the wrong shape.
  LlamaConfig bigger = c;
  bigger.num_hidden_layers = 3;
  GgufWriter g;
  add_gguf_model(&g, c, w);
  GgufFile f;
  ASSERT_TRUE(parse(g.serialize(), &f).ok());
  LlamaWeights w2;
  Status st = load_gguf_weights(f, bigger, &w2);
  EXPECT_NE(st.message().find("no tensor blk.2.attn_norm.weight"), std::string::npos) << st.message();
  LlamaConfig wide = c;
  wide.intermediate_size = 345;
  st = load_gguf_weights(f, wide, &w2);
  EXPECT_NE(st.message().find("blk.0.ffn_gate.weight has shape [344, 128]"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace flashserve::model
