// The Llama-architecture decoder exactly as Hugging Face's LlamaForCausalLM computes it
// (embedding, RMSNorm, rotary embeddings with llama3 scaling, GQA attention, SwiGLU MLP, final
// norm, lm_head or tied embeddings), on the CPU in fp32 with OpenBLAS GEMMs. Attention goes
// through the backend: new K/V appended into the paged cache (KVStorage), prompt chunks to
// the varlen paged prefill kernel, single decode tokens to the split-K decode kernel.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "kvcache/kv_storage.h"
#include "server/model/attention_step.h"
#include "server/model/config.h"
#include "server/model/model.h"
#include "server/model/weights.h"

namespace flashserve::model {

class LlamaModel : public Model {
 public:
  // The KV storage (fp32, on the CPU) holds num_blocks blocks of block_size tokens.
  static Status create(const LlamaConfig& config, LlamaWeights weights, int32_t num_blocks, int32_t block_size,
                       LlamaModel* out);
  // That storage's shape (the server sizes it from --kv-cache-memory with it).
  static KVStorageShape kv_storage_shape(const LlamaConfig& config, int32_t num_blocks, int32_t block_size);

  const LlamaConfig& config() const override { return config_; }
  const KVStorageShape& kv_shape() const override { return kv_.shape(); }
  KVStorage& kv() { return kv_; }
  Status forward(const ForwardBatch& batch, std::vector<float>* logits) override;
  Status copy_blocks(const BlockCopy* pairs, int32_t n) override { return kv_.copy_blocks(pairs, n); }

  // The plain reference: one sequence, no cache, attention computed directly (float64
  // softmax); *logits gets [tokens, vocab].
  Status reference_forward(const std::vector<int32_t>& tokens, std::vector<float>* logits) const;

 private:
  void rope(float* x, int32_t num_heads, const int32_t* positions, int64_t num_tokens) const;
  void mlp_block(const LayerWeights& l, float* x, int64_t t) const;
  // The attention block's input side: h = norm(x); q, k, v projections; rotary on q and k.
  void qkv(const LayerWeights& l, const float* x, const int32_t* positions, int64_t t, float* h, float* q, float* k,
           float* v) const;

  LlamaConfig config_;
  LlamaWeights w_;
  std::vector<double> inv_freq_;
  KVStorage kv_;
  AttentionStepBuilder steps_;  // each step's positions, tables and attention params
};

}  // namespace flashserve::model
