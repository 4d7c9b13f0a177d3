#include "server/model/attention_step.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace flashserve::model {

AttentionStepBuilder::AttentionStepBuilder(const LlamaConfig& c, Device device, DType dtype)
    : vocab_size_(c.vocab_size),
      device_(device),
      dtype_(dtype),
      num_heads_(c.num_attention_heads),
      num_kv_heads_(c.num_key_value_heads),
      head_dim_(c.head_dim) {}

Status AttentionStepBuilder::build(const ForwardBatch& b, int64_t width, const DecodePlanning* planning,
                                   AttentionStep* s, int32_t placeholder_rows) const {
  FS_RETURN_IF_ERROR(b.validate(vocab_size_, placeholder_rows));
  if (width < b.block_table_stride)
    return invalid_argument("attention step: block tables " + std::to_string(width) +
                            " wide, narrower than the batch's " + std::to_string(b.block_table_stride));
  const int32_t B = b.batch(), nd = b.num_decode;
  s->device = device_;
  s->dtype = dtype_;
  s->num_heads = num_heads_;
  s->num_kv_heads = num_kv_heads_;
  s->head_dim = head_dim_;
  s->mask = MaskParams{};
  s->mask.softmax_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim_)));
  s->mask.causal = true;

  s->batch = B;
  s->num_decode = nd;
  s->num_tokens = static_cast<int64_t>(b.tokens.size());
  s->max_prefill_q = 0;
  s->prefill_keys = 0;
  s->positions.resize(static_cast<size_t>(s->num_tokens));
  s->last_rows.resize(static_cast<size_t>(B));
  s->cu_prefill.clear();
  for (int32_t q = 0; q < B; ++q) {
    const int32_t begin = b.cu_seqlens_q[q], q_len = b.cu_seqlens_q[q + 1] - begin;
    for (int32_t i = 0; i < q_len; ++i) s->positions[begin + i] = b.seq_lens[q] - q_len + i;
    s->last_rows[q] = begin + q_len - 1;
    if (q >= nd) {
      s->max_prefill_q = std::max(s->max_prefill_q, q_len);
      s->prefill_keys += b.seq_lens[q];
    }
  }
  for (int32_t q = nd; q <= B; ++q) s->cu_prefill.push_back(b.cu_seqlens_q[q] - b.cu_seqlens_q[nd]);

  // The engine's batch builder writes the tables at the model's width already
  // (Model::block_table_width), and they are used as they are; narrower ones are widened here.
  s->block_table_stride = width;
  if (width == b.block_table_stride) {
    s->widened_tables_.clear();
    s->block_tables = b.block_tables.data();
  } else {
    s->widened_tables_.assign(static_cast<size_t>(B * width), 0);
    for (int32_t q = 0; q < B; ++q)
      std::copy_n(&b.block_tables[q * b.block_table_stride], b.block_table_stride, &s->widened_tables_[q * width]);
    s->block_tables = s->widened_tables_.data();
  }

  // The decode rows' splits, once for every layer (the decode rows are sequences 0 .. nd-1).
  s->decode_planned = false;
  s->decode_plan = DecodePlan{};
  if (planning != nullptr && nd > 0) {
    DecodePlanInput in;
    in.batch = nd;
    in.seq_lens = b.seq_lens.data();
    in.num_heads = num_heads_;
    in.num_kv_heads = num_kv_heads_;
    in.head_dim = head_dim_;
    in.block_size = planning->block_size;
    in.shape = planning->shape;
    if (planning->graph_mode) {
      in.graph_mode = true;
      in.max_seq_len = planning->max_seq_len;
    }
    FS_RETURN_IF_ERROR(plan_decode(in, &s->decode_plan));
    s->decode_planned = true;
  }
  return Status::Ok();
}

DecodeParams AttentionStep::decode_params(const void* q, void* o, const KVPageView& pages) const {
  DecodeParams d;
  d.device = device;
  d.dtype = dtype;
  d.batch = num_decode;
  d.q_len = 1;
  d.num_heads = num_heads;
  d.num_kv_heads = num_kv_heads;
  d.head_dim = head_dim;
  d.q = q;
  d.pages = pages;
  d.mask = mask;
  d.o = o;
  set_contiguous_strides(d);
  if (decode_planned) {
    d.num_splits = decode_plan.num_splits;
    d.pages_per_split = decode_plan.pages_per_split;
  }
  return d;
}

PrefillParams AttentionStep::prefill_params(const void* q, void* o, const int32_t* cu, const KVPageView& pages) const {
  // The first prefill token's row: past the decode rows' num_decode tokens.
  const int64_t skip = num_decode_tokens() * num_heads * head_dim * dtype_size(dtype);
  PrefillParams p;
  p.device = device;
  p.dtype = dtype;
  p.batch = num_prefill();
  p.num_heads = num_heads;
  p.num_kv_heads = num_kv_heads;
  p.head_dim = head_dim;
  p.q = static_cast<const char*>(q) + skip;
  p.cu_seqlens_q = cu;
  p.total_q = num_prefill_tokens();
  p.max_seqlen_q = max_prefill_q;
  p.paged = true;
  p.total_k = prefill_keys;
  p.pages = pages;
  p.pages.block_table += num_decode * pages.block_table_stride;
  p.pages.seq_lens += num_decode;
  p.mask = mask;
  p.o = static_cast<char*>(o) + skip;
  set_contiguous_strides(p);
  return p;
}

StepMetadataLayout step_metadata_layout(int64_t num_tokens, int32_t batch, int32_t num_prefill,
                                        int64_t block_table_stride) {
  StepMetadataLayout l;
  int64_t end = 0;
  auto place = [&](int64_t* offset, int64_t bytes) {
    *offset = (end + StepMetadataLayout::kAlign - 1) / StepMetadataLayout::kAlign * StepMetadataLayout::kAlign;
    end = *offset + bytes;
  };
  place(&l.tokens, num_tokens * 4);
  place(&l.positions, num_tokens * 4);
  place(&l.slots, num_tokens * 8);
  place(&l.cu_prefill, (int64_t{num_prefill} + 1) * 4);
  place(&l.seq_lens, int64_t{batch} * 4);
  place(&l.last_rows, int64_t{batch} * 4);
  place(&l.block_tables, int64_t{batch} * block_table_stride * 4);
  l.bytes = end;
  return l;
}

void write_step_metadata(const ForwardBatch& b, const AttentionStep& s, const StepMetadataLayout& l, char* buf) {
  auto put = [&](int64_t offset, const void* src, int64_t bytes) {
    if (bytes > 0) std::memcpy(buf + offset, src, static_cast<size_t>(bytes));
  };
  put(l.tokens, b.tokens.data(), s.num_tokens * 4);
  put(l.positions, s.positions.data(), s.num_tokens * 4);
  put(l.slots, b.slot_mapping.data(), s.num_tokens * 8);
  put(l.cu_prefill, s.cu_prefill.data(), static_cast<int64_t>(s.cu_prefill.size()) * 4);
  put(l.seq_lens, b.seq_lens.data(), int64_t{s.batch} * 4);
  put(l.last_rows, s.last_rows.data(), int64_t{s.batch} * 4);
  put(l.block_tables, s.block_tables, int64_t{s.batch} * s.block_table_stride * 4);
}

}  // namespace flashserve::model
