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

// A model that hands everything to an inner one and whose steps the engine treats as
// asynchronous (as a GPU model's): tests derive from it to watch or time the steps.
class AsyncModel : public model::Model {
 public:
  explicit AsyncModel(std::unique_ptr<model::Model> inner) : inner_(std::move(inner)) {}
  const model::LlamaConfig& config() const override { return inner_->config(); }
  const KVStorageShape& kv_shape() const override { return inner_->kv_shape(); }
  Status forward(const model::ForwardBatch& b, std::vector<float>* logits) override { return inner_->forward(b, logits); }
  Status copy_blocks(const BlockCopy* pairs, int32_t n) override { return inner_->copy_blocks(pairs, n); }
  Status begin_step(const model::ForwardBatch& b, const std::vector<model::SampleRow>& rows) override {
    return inner_->begin_step(b, rows);
  }
  Status end_step(std::vector<int32_t>* tokens, std::vector<model::TokenLogprobs>* logprobs) override {
    return inner_->end_step(tokens, logprobs);
  }
  bool async_steps() const override { return true; }

 private:
  std::unique_ptr<model::Model> inner_;
};

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
