#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

namespace flashserve::bench {

Status Workload::create(const WorkloadSpec& s, Workload* w) {
  if (s.q_lens.size() != s.seq_lens.size()) return invalid_argument("workload: q_lens and seq_lens differ in size");
  w->spec_ = s;
  const int64_t bs = s.block_size;
  int64_t blocks = 1, max_blocks = 1;  // block 0 stays the null block
  for (int32_t len : s.seq_lens) {
    blocks += (len + bs - 1) / bs;
    max_blocks = std::max<int64_t>(max_blocks, (len + bs - 1) / bs);
  }
  KVStorageShape shape;
  shape.num_blocks = static_cast<int32_t>(blocks);
  shape.num_kv_heads = s.num_kv_heads;
  shape.block_size = s.block_size;
  shape.head_dim = s.head_dim;
  shape.dtype = s.dtype;
  FS_RETURN_IF_ERROR(KVStorage::create(Device::kCPU, shape, &w->pool_));
  std::mt19937_64 rng(s.seed);
  // Scattered block ids: a shuffled permutation of 1..blocks-1.
  std::vector<int32_t> ids(static_cast<size_t>(blocks - 1));
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i + 1);
  std::shuffle(ids.begin(), ids.end(), rng);
  w->table_stride_ = max_blocks;
  w->block_table_.assign(s.seq_lens.size() * static_cast<size_t>(max_blocks), 0);
  std::normal_distribution<float> normal(0.f, 1.f);
  const int64_t row = int64_t{s.num_kv_heads} * s.head_dim, elem = dtype_size(s.dtype);
  std::vector<double> k, v;
  std::vector<int64_t> slots;
  size_t next = 0;
  for (size_t b = 0; b < s.seq_lens.size(); ++b) {
    const int64_t len = s.seq_lens[b];
    slots.resize(static_cast<size_t>(len));
    for (int64_t j = 0; j < len; ++j) {
      if (j % bs == 0) w->block_table_[b * max_blocks + j / bs] = ids[next++];
      slots[j] = int64_t{w->block_table_[b * max_blocks + j / bs]} * bs + j % bs;
    }
    k.assign(static_cast<size_t>((len * row * elem + 7) / 8), 0.0);
    v.assign(k.size(), 0.0);
    for (int64_t i = 0; i < len * row; ++i) {
      store_from_float(k.data(), s.dtype, i, normal(rng));
      store_from_float(v.data(), s.dtype, i, normal(rng));
    }
    FS_RETURN_IF_ERROR(w->pool_.append(0, 1, k.data(), v.data(), slots.data(), len));
  }
  w->cu_q_ = {0};
  for (int32_t q : s.q_lens) w->cu_q_.push_back(w->cu_q_.back() + q);
  const int64_t q_elems = w->total_q() * s.num_heads * s.head_dim;
  w->q_.assign(static_cast<size_t>((q_elems * elem + 7) / 8), 0.0);
  for (int64_t i = 0; i < q_elems; ++i) store_from_float(w->q_.data(), s.dtype, i, normal(rng));
  w->o_.assign(w->q_.size(), 0.0);
  w->lse_.assign(static_cast<size_t>(w->total_q() * s.num_heads), 0.f);
  return Status::Ok();
}

namespace {

MaskParams mask_of(const WorkloadSpec& s) {
  MaskParams m;
  m.softmax_scale = 1.f / std::sqrt(static_cast<float>(s.head_dim));
  m.causal = s.causal;
  return m;
}

}  // namespace

PrefillParams Workload::prefill_params() {
  PrefillParams p;
  p.dtype = spec_.dtype;
  p.batch = static_cast<int32_t>(spec_.seq_lens.size());
  p.num_heads = spec_.num_heads;
  p.num_kv_heads = spec_.num_kv_heads;
  p.head_dim = spec_.head_dim;
  p.q = q_.data();
  p.cu_seqlens_q = cu_q_.data();
  p.total_q = total_q();
  p.paged = true;
  p.pages = pool_.view(0, block_table_.data(), table_stride_, spec_.seq_lens.data());
  p.mask = mask_of(spec_);
  p.o = o_.data();
  p.lse = lse_.data();
  set_contiguous_strides(p);
  return p;
}

DecodeParams Workload::decode_params() {
  DecodeParams p;
  p.dtype = spec_.dtype;
  p.batch = static_cast<int32_t>(spec_.seq_lens.size());
  p.q_len = spec_.q_lens.empty() ? 1 : spec_.q_lens[0];
  p.num_heads = spec_.num_heads;
  p.num_kv_heads = spec_.num_kv_heads;
  p.head_dim = spec_.head_dim;
  p.q = q_.data();
  p.pages = pool_.view(0, block_table_.data(), table_stride_, spec_.seq_lens.data());
  p.mask = mask_of(spec_);
  p.o = o_.data();
  p.lse = lse_.data();
  set_contiguous_strides(p);
  return p;
}

int64_t Workload::kv_bytes() const {
  int64_t tokens = 0;
  for (int32_t len : spec_.seq_lens) tokens += len;
  return 2 * tokens * spec_.num_kv_heads * spec_.head_dim * dtype_size(spec_.dtype);
}

double Workload::attention_flops() const {
  double pairs = 0;
  for (size_t b = 0; b < spec_.seq_lens.size(); ++b) {
    const double q = spec_.q_lens[b], k = spec_.seq_lens[b];
    // Causal, bottom-right: query i sees k - q + i + 1 keys.
    pairs += spec_.causal ? q * (k - q) + q * (q + 1) / 2 : q * k;
  }
  return 4.0 * pairs * spec_.num_heads * spec_.head_dim;
}

}  // namespace flashserve::bench
