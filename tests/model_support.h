// Test support for the model, engine and server tests: the synthetic tiny model, and greedy
// decoding by its plain no-cache reference forward.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "server/model/llama.h"

namespace flashserve::test {

// The tiny preset's model with synthetic weights of `seed`, its cache holding num_blocks blocks
// of kv.dtype (fp32 by default).
inline std::unique_ptr<model::LlamaModel> tiny_model(uint64_t seed, int num_blocks, int block_size,
                                                     const model::KvCacheOptions& kv = {}) {
  model::LlamaConfig c;
  EXPECT_TRUE(model::synthetic_preset("tiny", &c).ok());
  model::LlamaWeights w;
  EXPECT_TRUE(model::synthetic_weights(c, seed, &w).ok());
  auto m = std::make_unique<model::LlamaModel>();
  EXPECT_TRUE(model::LlamaModel::create(c, std::move(w), num_blocks, block_size, m.get(), kv).ok());
  return m;
}

// n tokens of greedy decoding by the no-cache reference forward of tiny_model(seed).
inline std::vector<int32_t> reference_greedy(uint64_t seed, const std::vector<int32_t>& prompt, int n) {
  auto m = tiny_model(seed, 2, 16);
  const int32_t V = m->config().vocab_size;
  std::vector<int32_t> seq = prompt, out;
  std::vector<float> logits;
  for (int i = 0; i < n; ++i) {
    EXPECT_TRUE(m->reference_forward(seq, &logits).ok());
    const float* last = &logits[(seq.size() - 1) * V];
    out.push_back(static_cast<int32_t>(std::max_element(last, last + V) - last));
    seq.push_back(out.back());
  }
  return out;
}

}  // namespace flashserve::test
