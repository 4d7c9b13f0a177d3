// A random attention workload on the CPU: a paged cache filled through KVStorage::append with
// N(0,1) keys and values (never zeros), queries, outputs, and the params of both families.
// Shared by the CPU benchmark and the demo.
#pragma once

#include <cstdint>
#include <vector>

#include "attention/params.h"
#include "decode/params.h"
#include "kvcache/kv_storage.h"

namespace flashserve::bench {

struct WorkloadSpec {
  DType dtype = DType::kBFloat16;
  int32_t num_heads = 32, num_kv_heads = 8, head_dim = 128, block_size = 16;
  std::vector<int32_t> q_lens;    // new tokens per sequence
  std::vector<int32_t> seq_lens;  // keys per sequence (>= q_lens)
  bool causal = true;
  uint64_t seed = 1;
};

class Workload {
 public:
  static Status create(const WorkloadSpec& spec, Workload* out);

  PrefillParams prefill_params();  // paged prefill of all q_lens
  DecodeParams decode_params();    // q_len = q_lens[0] for every sequence

  const WorkloadSpec& spec() const { return spec_; }
  int64_t total_q() const { return cu_q_.back(); }
  int64_t kv_bytes() const;        // bytes of K and V the sequences hold
  double attention_flops() const;  // 4·Σ visible (q, k) pairs·heads·head_dim
  const void* o() const { return o_.data(); }
  const std::vector<float>& lse() const { return lse_; }

 private:
  WorkloadSpec spec_;
  KVStorage pool_;
  std::vector<int32_t> block_table_, cu_q_;
  int64_t table_stride_ = 0;
  std::vector<double> q_, o_;  // storage-type buffers, 8-byte aligned
  std::vector<float> lse_;
};

}  // namespace flashserve::bench
