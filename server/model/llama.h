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
#include "server/model/config.h"
#include "server/model/weights.h"

namespace flashserve::model {

// One step's work: the new tokens of each sequence, packed. The first num_decode sequences
// have exactly one new token each (decode); the rest are prompt chunks (prefill). Token i of
// sequence b sits at position seq_lens[b] - q_len_b + i.
struct ForwardBatch {
  int32_t num_decode = 0;
  std::vector<int32_t> tokens;        // [num_tokens]
  std::vector<int32_t> cu_seqlens_q;  // [batch + 1]
  std::vector<int32_t> seq_lens;      // [batch] keys after this step
  std::vector<int32_t> block_tables;  // [batch, block_table_stride]
  int64_t block_table_stride = 0;
  std::vector<int64_t> slot_mapping;  // [num_tokens] where each new token's K/V goes
  int32_t batch() const { return static_cast<int32_t>(seq_lens.size()); }
};

class LlamaModel {
 public:
  // The KV storage (fp32, on the CPU) holds num_blocks blocks of block_size tokens.
  static Status create(const LlamaConfig& config, LlamaWeights weights, int32_t num_blocks, int32_t block_size,
                       LlamaModel* out);

  const LlamaConfig& config() const { return config_; }
  KVStorage& kv() { return kv_; }

  // Runs one step; *logits gets [batch, vocab]: the logits after each sequence's last new token.
  Status forward(const ForwardBatch& batch, std::vector<float>* logits);

  // The plain reference: one sequence, no cache, attention computed directly (float64
  // softmax); *logits gets [tokens, vocab].
  Status reference_forward(const std::vector<int32_t>& tokens, std::vector<float>* logits) const;

 private:
  void rope(float* x, int32_t num_heads, const int32_t* positions, int64_t num_tokens) const;
  void mlp_block(const LayerWeights& l, float* x, int64_t t) const;

  LlamaConfig config_;
  LlamaWeights w_;
  std::vector<double> inv_freq_;
  KVStorage kv_;
};

}  // namespace flashserve::model
