// The attention step builder (server/model/attention_step.h): positions, the prefill rows'
// cu_seqlens, last rows, the block tables at their final width and the layer params, for odd
// batches (decode only, prefill only, mixed, chunked prefill after cached history, tables
// wider than needed), against values worked out here from the sequences' lengths; then the
// params run through the CPU decode and prefill kernels over a paged cache, against a float64
// attention computed from each sequence's keys directly, the decode rows also with the step's
// own split plan. The step's decode plan against plan_decode on inputs worked out here. And the
// one-buffer metadata layout.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attention/prefill.h"
#include "decode/decode.h"
#include "kvcache/kv_storage.h"
#include "server/model/attention_step.h"

namespace flashserve::model {
namespace {

// One sequence of a step: new tokens and the keys it has after the step (cached history + new).
struct Seq {
  int32_t q_len;
  int32_t k_len;
};

struct Case {
  std::string name;
  std::vector<Seq> seqs;  // the decode ones (q_len 1) first
  int32_t num_decode;
  int64_t extra_width;    // block table width past the batch's widest table
};

constexpr int32_t kBlockSize = 5, kNumBlocks = 97, kHeads = 6, kKvHeads = 2, kHeadDim = 24, kVocab = 301;

LlamaConfig small_config() {
  LlamaConfig c;
  c.vocab_size = kVocab;
  c.num_attention_heads = kHeads;
  c.num_key_value_heads = kKvHeads;
  c.head_dim = kHeadDim;
  return c;
}

// A batch for the case: random tokens, scattered distinct blocks, each sequence's slots for its
// new tokens; tables as wide as the widest sequence needs.
ForwardBatch make_batch(const Case& k, std::mt19937& rng) {
  ForwardBatch b;
  b.num_decode = k.num_decode;
  int64_t widest = 1;
  for (const Seq& s : k.seqs) widest = std::max<int64_t>(widest, (s.k_len + kBlockSize - 1) / kBlockSize);
  b.block_table_stride = widest;
  std::vector<int32_t> free_blocks(kNumBlocks - 1);
  std::iota(free_blocks.begin(), free_blocks.end(), 1);  // block 0: the null block
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  size_t next_block = 0;
  b.cu_seqlens_q = {0};
  for (const Seq& s : k.seqs) {
    std::vector<int32_t> row(static_cast<size_t>(widest), 0);
    for (int32_t j = 0; j < (s.k_len + kBlockSize - 1) / kBlockSize; ++j) row[j] = free_blocks.at(next_block++);
    for (int32_t i = 0; i < s.q_len; ++i) {
      b.tokens.push_back(std::uniform_int_distribution<int32_t>(0, kVocab - 1)(rng));
      const int32_t key = s.k_len - s.q_len + i;
      b.slot_mapping.push_back(int64_t{row[key / kBlockSize]} * kBlockSize + key % kBlockSize);
    }
    b.cu_seqlens_q.push_back(b.cu_seqlens_q.back() + s.q_len);
    b.seq_lens.push_back(s.k_len);
    b.block_tables.insert(b.block_tables.end(), row.begin(), row.end());
  }
  return b;
}

std::vector<Case> cases() {
  return {
      {"decode_only", {{1, 1}, {1, 13}, {1, 5}, {1, 26}}, 4, 0},
      {"prefill_only", {{7, 7}, {1, 1}, {11, 11}}, 0, 0},
      {"mixed", {{1, 9}, {1, 3}, {6, 6}, {13, 13}, {2, 2}}, 2, 0},
      // Chunks after cached history: keys past the new tokens' first position.
      {"chunked_with_history", {{1, 31}, {5, 17}, {3, 10}, {9, 9}}, 1, 0},
      {"wide_tables", {{1, 12}, {1, 1}, {4, 21}, {1, 6}}, 2, 9},
      {"one_token_prefill_wide", {{1, 4}}, 0, 3},
  };
}

TEST(AttentionStep, PositionsCuSeqlensLastRowsAndTables) {
  std::mt19937 rng(11);
  const AttentionStepBuilder builder(small_config(), Device::kCPU, DType::kFloat32);
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const ForwardBatch b = make_batch(k, rng);
    const int64_t width = b.block_table_stride + k.extra_width;
    AttentionStep s;
    const Status st = builder.build(b, width, &s);
    ASSERT_TRUE(st.ok()) << st.to_string();
    // Worked out from the lengths alone: the new tokens are each sequence's last q_len keys.
    std::vector<int32_t> positions, cu_prefill = {0}, last_rows;
    int32_t row = 0, max_q = 0;
    int64_t prefill_keys = 0;
    for (size_t q = 0; q < k.seqs.size(); ++q) {
      for (int32_t i = k.seqs[q].k_len - k.seqs[q].q_len; i < k.seqs[q].k_len; ++i) positions.push_back(i);
      row += k.seqs[q].q_len;
      last_rows.push_back(row - 1);
      if (static_cast<int32_t>(q) >= k.num_decode) {
        cu_prefill.push_back(cu_prefill.back() + k.seqs[q].q_len);
        max_q = std::max(max_q, k.seqs[q].q_len);
        prefill_keys += k.seqs[q].k_len;
      }
    }
    EXPECT_EQ(s.batch, static_cast<int32_t>(k.seqs.size()));
    EXPECT_EQ(s.num_decode, k.num_decode);
    EXPECT_EQ(s.num_prefill(), static_cast<int32_t>(k.seqs.size()) - k.num_decode);
    EXPECT_EQ(s.num_tokens, row);
    EXPECT_EQ(s.positions, positions);
    EXPECT_EQ(s.cu_prefill, cu_prefill);
    EXPECT_EQ(s.last_rows, last_rows);
    EXPECT_EQ(s.max_prefill_q, max_q);
    EXPECT_EQ(s.prefill_keys, prefill_keys);
    ASSERT_EQ(s.block_table_stride, width);
    if (k.extra_width == 0) {
      EXPECT_EQ(s.block_tables, b.block_tables.data()) << "tables at their width are copied";
    }
    for (int32_t q = 0; q < s.batch; ++q)
      for (int64_t j = 0; j < width; ++j) {
        const int32_t want = j < b.block_table_stride ? b.block_tables[q * b.block_table_stride + j] : 0;
        ASSERT_EQ(s.block_tables[q * width + j], want) << "row " << q << " entry " << j;
      }

    // The params, for made-up q/o/table addresses (the builder only moves them).
    std::vector<float> q(static_cast<size_t>(s.num_tokens) * kHeads * kHeadDim), o(q.size());
    std::vector<int32_t> cu_elsewhere(cu_prefill.size());
    KVPageView pages;
    pages.block_table = s.block_tables;
    pages.block_table_stride = width;
    pages.seq_lens = b.seq_lens.data();
    pages.block_size = kBlockSize;
    const DecodeParams d = s.decode_params(q.data(), o.data(), pages);
    EXPECT_EQ(d.device, Device::kCPU);
    EXPECT_EQ(d.dtype, DType::kFloat32);
    EXPECT_EQ(d.batch, k.num_decode);
    EXPECT_EQ(d.q_len, 1);
    EXPECT_EQ(d.num_heads, kHeads);
    EXPECT_EQ(d.num_kv_heads, kKvHeads);
    EXPECT_EQ(d.head_dim, kHeadDim);
    EXPECT_EQ(d.q, q.data());
    EXPECT_EQ(d.o, o.data());
    EXPECT_EQ(d.q_row_stride, kHeads * kHeadDim);
    EXPECT_EQ(d.q_head_stride, kHeadDim);
    EXPECT_EQ(d.pages.block_table, s.block_tables);
    EXPECT_EQ(d.pages.seq_lens, b.seq_lens.data());
    EXPECT_TRUE(d.mask.causal);
    EXPECT_FLOAT_EQ(d.mask.softmax_scale, 1.f / std::sqrt(static_cast<float>(kHeadDim)));
    EXPECT_EQ(d.num_splits, 0);
    const PrefillParams p = s.prefill_params(q.data(), o.data(), cu_elsewhere.data(), pages);
    EXPECT_EQ(p.batch, s.num_prefill());
    EXPECT_EQ(p.q, q.data() + int64_t{k.num_decode} * kHeads * kHeadDim);
    EXPECT_EQ(p.o, o.data() + int64_t{k.num_decode} * kHeads * kHeadDim);
    EXPECT_EQ(p.cu_seqlens_q, cu_elsewhere.data());
    EXPECT_EQ(p.total_q, s.num_tokens - k.num_decode);
    EXPECT_EQ(p.max_seqlen_q, max_q);
    EXPECT_TRUE(p.paged);
    EXPECT_EQ(p.total_k, prefill_keys);  // the key tile's hint
    EXPECT_EQ(p.pages.block_table, s.block_tables + k.num_decode * width);
    EXPECT_EQ(p.pages.block_table_stride, width);
    EXPECT_EQ(p.pages.seq_lens, b.seq_lens.data() + k.num_decode);
    EXPECT_EQ(p.o_row_stride, kHeads * kHeadDim);
    EXPECT_TRUE(p.mask.causal);
  }
}

// bf16 on the device: q and o move by 2-byte elements.
TEST(AttentionStep, PrefillParamsMoveByTheElementSize) {
  std::mt19937 rng(5);
  const AttentionStepBuilder builder(small_config(), Device::kCUDA, DType::kBFloat16);
  const Case k{"mixed", {{1, 9}, {1, 3}, {1, 8}, {6, 6}}, 3, 0};
  const ForwardBatch b = make_batch(k, rng);
  AttentionStep s;
  ASSERT_TRUE(builder.build(b, b.block_table_stride, &s).ok());
  std::vector<uint16_t> q(static_cast<size_t>(s.num_tokens) * kHeads * kHeadDim), o(q.size());
  const PrefillParams p = s.prefill_params(q.data(), o.data(), nullptr, KVPageView{});
  EXPECT_EQ(p.device, Device::kCUDA);
  EXPECT_EQ(p.dtype, DType::kBFloat16);
  EXPECT_EQ(p.q, q.data() + 3 * kHeads * kHeadDim);
  EXPECT_EQ(p.o, o.data() + 3 * kHeads * kHeadDim);
  EXPECT_EQ(s.decode_params(q.data(), o.data(), KVPageView{}).dtype, DType::kBFloat16);
}

TEST(AttentionStep, RefusesNarrowTablesAndBadBatches) {
  std::mt19937 rng(7);
  const AttentionStepBuilder builder(small_config(), Device::kCPU, DType::kFloat32);
  const Case k{"mixed", {{1, 9}, {4, 21}}, 1, 0};
  ForwardBatch b = make_batch(k, rng);
  AttentionStep s;
  EXPECT_EQ(builder.build(b, b.block_table_stride - 1, &s).code(), StatusCode::kInvalidArgument);
  ForwardBatch two_token_decode = b;
  two_token_decode.num_decode = 2;  // the second has 4 tokens
  EXPECT_EQ(builder.build(two_token_decode, b.block_table_stride, &s).code(), StatusCode::kInvalidArgument);
  b.tokens[2] = kVocab;
  EXPECT_EQ(builder.build(b, b.block_table_stride, &s).code(), StatusCode::kOutOfRange);
}

// The params, through the CPU kernels over a paged cache filled with each sequence's keys at
// the blocks of its table, against float64 causal attention over those keys.
// Planned: the step's plan for a made-up machine of 7 SMs × 2 CTAs in graph mode (one wave's
// splits: 2 to 7 here, more than the short sequences' pages, so some splits are empty), run by
// the CPU decode with the workspace the plan asks for.
TEST(AttentionStep, ParamsRunTheKernelsLikeTheReference) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.f, 1.f);
  const AttentionStepBuilder builder(small_config(), Device::kCPU, DType::kFloat32);
  for (const bool planned : {false, true})
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name + (planned ? " planned" : ""));
    const ForwardBatch b = make_batch(k, rng);
    const int64_t width = b.block_table_stride + k.extra_width;
    DecodePlanning planning;
    planning.shape = DecodeLaunchShape{16, 2, 7};
    planning.block_size = kBlockSize;
    planning.graph_mode = true;
    planning.max_seq_len = static_cast<int32_t>(width) * kBlockSize;
    AttentionStep s;
    ASSERT_TRUE(builder.build(b, width, planned ? &planning : nullptr, &s).ok());
    ASSERT_EQ(s.decode_planned, planned && s.num_decode > 0);
    if (s.decode_planned) {
      EXPECT_GT(s.decode_plan.num_splits, 1);
    }
    KVStorageShape shape;
    shape.num_blocks = kNumBlocks;
    shape.num_kv_heads = kKvHeads;
    shape.block_size = kBlockSize;
    shape.head_dim = kHeadDim;
    shape.dtype = DType::kFloat32;
    KVStorage kv;
    ASSERT_TRUE(KVStorage::create(Device::kCPU, shape, &kv).ok());
    // Every key of every sequence: [k_len, kv_heads, head_dim], into its slots.
    const int64_t KV = int64_t{kKvHeads} * kHeadDim, QW = int64_t{kHeads} * kHeadDim;
    std::vector<std::vector<float>> keys(k.seqs.size()), values(k.seqs.size());
    for (size_t q = 0; q < k.seqs.size(); ++q) {
      const int32_t n = k.seqs[q].k_len;
      keys[q].resize(static_cast<size_t>(n * KV));
      values[q].resize(keys[q].size());
      for (auto& x : keys[q]) x = normal(rng);
      for (auto& x : values[q]) x = normal(rng);
      std::vector<int64_t> slots(static_cast<size_t>(n));
      for (int32_t j = 0; j < n; ++j)
        slots[j] = int64_t{b.block_tables[q * b.block_table_stride + j / kBlockSize]} * kBlockSize + j % kBlockSize;
      ASSERT_TRUE(kv.append(0, 1, keys[q].data(), values[q].data(), slots.data(), n).ok());
    }
    std::vector<float> qs(static_cast<size_t>(s.num_tokens * QW)), o(qs.size(), NAN);
    for (auto& x : qs) x = normal(rng);
    const KVPageView pages = kv.view(0, s.block_tables, s.block_table_stride, b.seq_lens.data());
    std::vector<float> workspace(static_cast<size_t>(s.decode_plan.workspace_bytes / sizeof(float)));
    if (s.num_decode > 0) {
      DecodeParams d = s.decode_params(qs.data(), o.data(), pages);
      ASSERT_EQ(d.num_splits, planned ? s.decode_plan.num_splits : 0);
      if (planned) {
        d.workspace = workspace.data();
        d.workspace_bytes = s.decode_plan.workspace_bytes;
      }
      const Status st = decode(d);
      ASSERT_TRUE(st.ok()) << st.to_string();
    }
    if (s.num_prefill() > 0) {
      ASSERT_TRUE(prefill(s.prefill_params(qs.data(), o.data(), s.cu_prefill.data(), pages)).ok());
    }
    // float64: token i of sequence q sits at key position k_len - q_len + i and sees keys 0..it.
    const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
    double max_err = 0;
    int64_t row = 0;
    for (size_t q = 0; q < k.seqs.size(); ++q) {
      for (int32_t i = 0; i < k.seqs[q].q_len; ++i, ++row) {
        const int32_t pos = k.seqs[q].k_len - k.seqs[q].q_len + i;
        for (int32_t h = 0; h < kHeads; ++h) {
          const int32_t kvh = h / (kHeads / kKvHeads);
          std::vector<double> w(static_cast<size_t>(pos + 1));
          double mx = -INFINITY, sum = 0;
          for (int32_t j = 0; j <= pos; ++j) {
            double dot = 0;
            for (int32_t e = 0; e < kHeadDim; ++e)
              dot += static_cast<double>(qs[row * QW + h * kHeadDim + e]) * keys[q][j * KV + kvh * kHeadDim + e];
            mx = std::max(mx, w[j] = dot * scale);
          }
          for (auto& x : w) sum += (x = std::exp(x - mx));
          for (int32_t e = 0; e < kHeadDim; ++e) {
            double acc = 0;
            for (int32_t j = 0; j <= pos; ++j) acc += w[j] * values[q][j * KV + kvh * kHeadDim + e];
            const double got = o[row * QW + h * kHeadDim + e];
            ASSERT_TRUE(std::isfinite(got)) << "row " << row << " head " << h;
            max_err = std::max(max_err, std::fabs(got - acc / sum));
          }
        }
      }
    }
    EXPECT_LT(max_err, 1e-5);
  }
}

// A batch of the case's lengths with null-block tables block_size wide (the plan reads only the
// lengths): long sequences, more blocks than make_batch's pool.
ForwardBatch lengths_batch(const Case& k, int32_t block_size) {
  ForwardBatch b;
  b.num_decode = k.num_decode;
  int64_t widest = 1;
  for (const Seq& s : k.seqs) widest = std::max<int64_t>(widest, (s.k_len + block_size - 1) / block_size);
  b.block_table_stride = widest;
  b.cu_seqlens_q = {0};
  for (const Seq& s : k.seqs) {
    for (int32_t i = 0; i < s.q_len; ++i) {
      b.tokens.push_back(i % kVocab);
      b.slot_mapping.push_back(-1);
    }
    b.cu_seqlens_q.push_back(b.cu_seqlens_q.back() + s.q_len);
    b.seq_lens.push_back(s.k_len);
  }
  b.block_tables.assign(static_cast<size_t>(k.seqs.size() * widest), 0);
  return b;
}

// The step's decode plan is plan_decode's for the decode rows (sequences 0 .. num_decode-1) on
// the planning's machine, block size and graph mode, worked out here from the case's lengths;
// decode_params carries its splits, and the workspace is left to the caller.
TEST(AttentionStep, PlansTheDecodeRowsLikeThePlanner) {
  struct PlanCase {
    Case k;
    bool graph_mode;
    bool want_splits;  // the plan splits some sequence (the case is not trivially one split)
  };
  const std::vector<PlanCase> plan_cases = {
      {{"mixed", {{1, 3001}, {1, 77}, {1, 1200}, {9, 9}, {5, 400}}, 3, 0}, false, true},
      {{"decode_only", {{1, 4097}, {1, 13}, {1, 2500}, {1, 650}, {1, 1}}, 5, 0}, false, true},
      {{"one_long_decode", {{1, 20011}}, 1, 0}, false, true},
      {{"short_decode", {{1, 30}, {1, 2}, {1, 101}}, 3, 0}, false, false},
      {{"graph_wide", {{1, 333}, {1, 1500}, {1, 7}}, 3, 211}, true, true},
      {{"graph_one", {{1, 5}}, 1, 1000}, true, true},
      {{"mixed_graph_wide", {{1, 90}, {1, 1111}, {3, 40}}, 2, 57}, true, true},
  };
  constexpr int32_t kPlanBlock = 16;
  const AttentionStepBuilder builder(small_config(), Device::kCUDA, DType::kBFloat16);
  for (const DecodeLaunchShape shape : {DecodeLaunchShape{16, 2, 11}, DecodeLaunchShape{16, 1, 132},
                                        DecodeLaunchShape{0, 1, 3}}) {
    for (const PlanCase& pc : plan_cases) {
      const Case& k = pc.k;
      SCOPED_TRACE(k.name + " on " + std::to_string(shape.rows_per_cta) + "/" + std::to_string(shape.ctas_per_sm) +
                   "/" + std::to_string(shape.sm_count));
      const ForwardBatch b = lengths_batch(k, kPlanBlock);
      const int64_t width = b.block_table_stride + k.extra_width;
      DecodePlanning planning;
      planning.shape = shape;
      planning.block_size = kPlanBlock;
      planning.graph_mode = pc.graph_mode;
      planning.max_seq_len = pc.graph_mode ? static_cast<int32_t>(width) * kPlanBlock : 0;
      AttentionStep s;
      const Status st = builder.build(b, width, &planning, &s);
      ASSERT_TRUE(st.ok()) << st.to_string();
      ASSERT_TRUE(s.decode_planned);

      std::vector<int32_t> decode_lens;
      for (int32_t q = 0; q < k.num_decode; ++q) decode_lens.push_back(k.seqs[q].k_len);
      DecodePlanInput in;
      in.batch = k.num_decode;
      in.seq_lens = decode_lens.data();
      in.q_len = 1;
      in.num_heads = kHeads;
      in.num_kv_heads = kKvHeads;
      in.head_dim = kHeadDim;
      in.block_size = kPlanBlock;
      in.shape = shape;
      in.graph_mode = pc.graph_mode;
      in.max_seq_len = planning.max_seq_len;
      DecodePlan want;
      ASSERT_TRUE(plan_decode(in, &want).ok());
      EXPECT_EQ(s.decode_plan.num_splits, want.num_splits);
      EXPECT_EQ(s.decode_plan.pages_per_split, want.pages_per_split);
      EXPECT_EQ(s.decode_plan.work_items, want.work_items);
      EXPECT_DOUBLE_EQ(s.decode_plan.wave_fill, want.wave_fill);
      EXPECT_DOUBLE_EQ(s.decode_plan.makespan, want.makespan);
      EXPECT_EQ(s.decode_plan.workspace_bytes, want.workspace_bytes);
      if (pc.want_splits && shape.sm_count > 3) {
        EXPECT_GT(want.num_splits, 1);
      } else if (!pc.want_splits) {
        EXPECT_EQ(want.num_splits, 1);
      }

      std::vector<uint16_t> q(static_cast<size_t>(s.num_tokens) * kHeads * kHeadDim), o(q.size());
      const DecodeParams d = s.decode_params(q.data(), o.data(), KVPageView{});
      EXPECT_EQ(d.batch, k.num_decode);
      EXPECT_EQ(d.num_splits, want.num_splits);
      EXPECT_EQ(d.pages_per_split, want.pages_per_split);
      EXPECT_EQ(d.workspace, nullptr);
      EXPECT_EQ(d.workspace_bytes, 0);

      // The same batch built without a planning: no plan, and decode plans itself.
      AttentionStep unplanned;
      ASSERT_TRUE(builder.build(b, width, &unplanned).ok());
      EXPECT_FALSE(unplanned.decode_planned);
      EXPECT_EQ(unplanned.decode_params(q.data(), o.data(), KVPageView{}).num_splits, 0);
    }
  }
}

TEST(AttentionStep, PlansNothingWithoutDecodeRowsAndRefusesABadPlanning) {
  const AttentionStepBuilder builder(small_config(), Device::kCUDA, DType::kBFloat16);
  DecodePlanning planning;
  planning.shape = DecodeLaunchShape{16, 2, 11};
  planning.block_size = 16;
  AttentionStep s;
  // A step is reused: a plan from an earlier build does not stay.
  const ForwardBatch decode_rows = lengths_batch({"decode", {{1, 3001}, {2, 9}}, 1, 0}, 16);
  ASSERT_TRUE(builder.build(decode_rows, decode_rows.block_table_stride, &planning, &s).ok());
  ASSERT_TRUE(s.decode_planned);
  const ForwardBatch prefill_only = lengths_batch({"prefill", {{7, 300}, {3, 3}}, 0, 0}, 16);
  ASSERT_TRUE(builder.build(prefill_only, prefill_only.block_table_stride, &planning, &s).ok());
  EXPECT_FALSE(s.decode_planned);
  EXPECT_EQ(s.decode_plan.workspace_bytes, 0);
  // The planner's refusals come back from build.
  DecodePlanning no_machine = planning;
  no_machine.shape = DecodeLaunchShape{};
  EXPECT_EQ(builder.build(decode_rows, decode_rows.block_table_stride, &no_machine, &s).code(),
            StatusCode::kInvalidArgument);
  DecodePlanning no_block_size = planning;
  no_block_size.block_size = 0;
  EXPECT_EQ(builder.build(decode_rows, decode_rows.block_table_stride, &no_block_size, &s).code(),
            StatusCode::kInvalidArgument);
}

TEST(StepMetadataLayout, AlignedInOrderAndBoundedByTheLargest) {
  const StepMetadataLayout big = step_metadata_layout(4096, 256, 256, 8192);
  for (const int64_t t : {1, 7, 77, 257, 4096})
    for (const int32_t batch : {1, 3, 64, 256})
      for (const int32_t prefill : {0, 1, batch})
        for (const int64_t width : {1, 13, 8192}) {
          if (batch > t) continue;
          const StepMetadataLayout l = step_metadata_layout(t, batch, prefill, width);
          // [offset, size) of each array in order: aligned, apart, and the last one ends at bytes.
          const std::vector<std::pair<int64_t, int64_t>> parts = {
              {l.tokens, 4 * t},         {l.positions, 4 * t},        {l.slots, 8 * t},
              {l.cu_prefill, 4 * (prefill + 1)}, {l.seq_lens, 4 * batch}, {l.last_rows, 4 * batch},
              {l.block_tables, 4 * batch * width}};
          int64_t end = 0;
          for (const auto& [offset, size] : parts) {
            ASSERT_EQ(offset % StepMetadataLayout::kAlign, 0);
            ASSERT_GE(offset, end);
            ASSERT_LT(offset - end, StepMetadataLayout::kAlign);
            end = offset + size;
          }
          EXPECT_EQ(l.bytes, end);
          EXPECT_LE(l.bytes, big.bytes);
          EXPECT_EQ(step_metadata_layout(t, batch, prefill, width), l) << "one layout for one shape";
        }
}

TEST(StepMetadataLayout, WritesEachArrayWhereTheLayoutSays) {
  std::mt19937 rng(31);
  const AttentionStepBuilder builder(small_config(), Device::kCUDA, DType::kBFloat16);
  const Case k{"wide", {{1, 12}, {1, 1}, {4, 21}, {1, 6}, {3, 3}}, 2, 4};
  const ForwardBatch b = make_batch(k, rng);
  AttentionStep s;
  ASSERT_TRUE(builder.build(b, b.block_table_stride + k.extra_width, &s).ok());
  const StepMetadataLayout l = step_metadata_layout(s);
  std::vector<char> buf(static_cast<size_t>(l.bytes), 0x55);
  write_step_metadata(b, s, l, buf.data());
  auto read = [&](int64_t offset, size_t n, auto zero) {
    std::vector<decltype(zero)> v(n);
    std::memcpy(v.data(), buf.data() + offset, n * sizeof(zero));
    return v;
  };
  EXPECT_EQ(read(l.tokens, b.tokens.size(), int32_t{}), b.tokens);
  EXPECT_EQ(read(l.positions, s.positions.size(), int32_t{}), s.positions);
  EXPECT_EQ(read(l.slots, b.slot_mapping.size(), int64_t{}), b.slot_mapping);
  EXPECT_EQ(read(l.cu_prefill, 4, int32_t{}), (std::vector<int32_t>{0, 4, 5, 8}));
  EXPECT_EQ(read(l.seq_lens, 5, int32_t{}), b.seq_lens);
  EXPECT_EQ(read(l.last_rows, 5, int32_t{}), (std::vector<int32_t>{0, 1, 5, 6, 9}));
  const std::vector<int32_t> tables = read(l.block_tables, static_cast<size_t>(5 * s.block_table_stride), int32_t{});
  EXPECT_EQ(tables, std::vector<int32_t>(s.block_tables, s.block_tables + 5 * s.block_table_stride));
}

}  // namespace
}  // namespace flashserve::model
