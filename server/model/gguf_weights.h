// A Llama model from a GGUF file (llama.cpp's format): its llama.* metadata as a LlamaConfig,
// its tensors (llama.cpp's names, any type ggml_quants.h dequantizes) as fp32 LlamaWeights in
// Hugging Face's layout, so the CPU and CUDA models run it as they run a safetensors folder.
//
// llama.cpp's converter (convert_hf_to_gguf.py) reorders the rows of the Q and K projections
// inside each head, from Hugging Face's half-split rotary pairs (i, i + D/2) to ggml's
// interleaved pairs (2i, 2i + 1): GGUF row h·D + 2i + j holds HF row h·D + j·D/2 + i. The loader
// undoes that (as transformers' GGUF loader does), so our half-split rotary computes the same.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/model/config.h"
#include "server/model/gguf.h"
#include "server/model/weights.h"

namespace flashserve::model {

// general.architecture must be "llama". Reads llama.block_count, embedding_length,
// feed_forward_length, attention.head_count(_kv), attention.key_length (head_dim; default
// embedding_length / head_count), rope.freq_base, attention.layer_norm_rms_epsilon,
// context_length, vocab_size (else the tokens array's length), tokenizer.ggml.eos_token_id;
// tied embeddings when there is no output.weight. What the model does not implement (rope
// scaling of any type, rope_freqs factors, partial rotary, MoE, value_length != key_length) is
// UNSUPPORTED with the key named.
Status gguf_llama_config(const GgufFile& file, LlamaConfig* out);
// Every tensor, dequantized, shapes checked, Q/K rows un-permuted.
Status load_gguf_weights(const GgufFile& file, const LlamaConfig& config, LlamaWeights* out);
// open + config + weights.
Status load_gguf_model(const std::string& path, LlamaConfig* config, LlamaWeights* weights);
// A regular file whose name ends in .gguf or whose first bytes are the GGUF magic.
bool is_gguf_file(const std::string& path);

// The converter's Q/K row order and its inverse, on a [num_heads·head_dim, cols] row-major matrix.
void gguf_permute_qk_rows(std::vector<float>* w, int32_t num_heads, int32_t head_dim, int64_t cols);
void gguf_unpermute_qk_rows(std::vector<float>* w, int32_t num_heads, int32_t head_dim, int64_t cols);

// Writes a llama GGUF (metadata, tensors stored as F32/F16/BF16, Q/K permuted as the converter
// does) from Hugging Face-layout weights: for tests. add_gguf_model puts the same into a writer
// that may hold more (a tokenizer's keys; keys that make the file bad).
Status write_gguf_model(const std::string& path, const LlamaConfig& config, const LlamaWeights& weights,
                        GgmlType stored_as = GgmlType::kF32);
void add_gguf_model(GgufWriter* writer, const LlamaConfig& config, const LlamaWeights& weights,
                    GgmlType stored_as = GgmlType::kF32);

}  // namespace flashserve::model
