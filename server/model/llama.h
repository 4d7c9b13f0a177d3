// The Llama-architecture decoder exactly as Hugging Face's LlamaForCausalLM computes it
// (embedding, RMSNorm, rotary embeddings with llama3 scaling, GQA attention, SwiGLU MLP, final
// norm, lm_head or tied embeddings), on the CPU in fp32 with OpenBLAS GEMMs. Attention goes
// through the backend: new K/V appended into the paged cache (KVStorage), prompt chunks to
// the varlen paged prefill kernel, single decode tokens to the split-K decode kernel.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "kvcache/kv_storage.h"
#include "server/model/attention_step.h"
#include "server/model/config.h"
#include "server/model/kv_cache_options.h"
#include "server/model/model.h"
#include "server/model/weights.h"

namespace flashserve::model {

class LlamaModel : public Model {
 public:
  // The KV storage (on the CPU) holds num_blocks blocks of block_size tokens of kv.dtype: fp32
  // (the default, the model's own type), bf16/fp16 (rounded on append, widened exactly by the
  // kernels) or FP8 with scales from kv, from the checkpoint's k_scale/v_scale, or calibrated on
  // each layer's first prefill (server/model/kv_cache_options.h).
  static Status create(const LlamaConfig& config, LlamaWeights weights, int32_t num_blocks, int32_t block_size,
                       LlamaModel* out, const KvCacheOptions& kv = {});
  // That storage's shape (the server sizes it from --kv-cache-memory with it).
  static KVStorageShape kv_storage_shape(const LlamaConfig& config, int32_t num_blocks, int32_t block_size,
                                         DType dtype = DType::kFloat32);
  // FP8 caches: whether each layer's scales are fixed yet, and where they came from.
  const KvScales& kv_scales() const { return kv_scales_; }

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
  // FP8: layer l's scales from the first step that writes it (amax of that step's K/V per kv head).
  Status calibrate_scales(int32_t layer, const float* k, const float* v, int64_t num_tokens);

  KVStorage kv_;
  KvScales kv_scales_;
  AttentionStepBuilder steps_;  // each step's positions, tables and attention params
};

}  // namespace flashserve::model
