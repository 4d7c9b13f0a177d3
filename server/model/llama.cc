#include "server/model/llama.h"

#if FLASHSERVE_HAVE_CBLAS
#include <cblas.h>
#endif

#include <algorithm>
#include <cmath>
#include <string>

#include "attention/prefill.h"
#include "common/thread_pool.h"
#include "decode/decode.h"

namespace flashserve::model {

namespace {

// y[t, n] = x[t, k] · w[n, k]ᵀ (w is a PyTorch Linear weight, [out, in]).
void linear(const float* x, const std::vector<float>& w, int64_t t, int64_t n, int64_t k, float* y) {
#if FLASHSERVE_HAVE_CBLAS
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(t), static_cast<int>(n), static_cast<int>(k),
              1.f, x, static_cast<int>(k), w.data(), static_cast<int>(k), 0.f, y, static_cast<int>(n));
#else
  // Builds without BLAS (the GPU machine's test binaries): plain dot products, rows in parallel.
  ThreadPool::global().parallel_for(t * n, [&](int64_t i) {
    const float* a = x + (i / n) * k;
    const float* b = w.data() + (i % n) * k;
    float acc = 0.f;
    for (int64_t j = 0; j < k; ++j) acc += a[j] * b[j];
    y[i] = acc;
  });
#endif
}

// RMSNorm as Hugging Face computes it: in fp32, x · rsqrt(mean(x²) + eps) · weight.
void rms_norm(const float* x, const std::vector<float>& weight, int64_t t, int64_t h, double eps, float* y) {
  for (int64_t i = 0; i < t; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < h; ++j) ss += static_cast<double>(x[i * h + j]) * x[i * h + j];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / h + eps));
    for (int64_t j = 0; j < h; ++j) y[i * h + j] = weight[j] * (x[i * h + j] * inv);
  }
}

}  // namespace

KVStorageShape LlamaModel::kv_storage_shape(const LlamaConfig& config, int32_t num_blocks, int32_t block_size,
                                            DType dtype) {
  KVStorageShape shape;
  shape.num_layers = config.num_hidden_layers;
  shape.num_blocks = num_blocks;
  shape.num_kv_heads = config.num_key_value_heads;
  shape.block_size = block_size;
  shape.head_dim = config.head_dim;
  shape.dtype = dtype;
  return shape;
}

Status LlamaModel::create(const LlamaConfig& config, LlamaWeights weights, int32_t num_blocks, int32_t block_size,
                          LlamaModel* out, const KvCacheOptions& kv) {
  FS_RETURN_IF_ERROR(config.validate());
  FS_RETURN_IF_ERROR(kv.validate());
  LlamaModel m;
  m.config_ = config;
  m.w_ = std::move(weights);
  m.inv_freq_ = config.inv_freq();
  m.steps_ = AttentionStepBuilder(config, Device::kCPU, DType::kFloat32);
  FS_RETURN_IF_ERROR(
      KVStorage::create(Device::kCPU, kv_storage_shape(config, num_blocks, block_size, kv.dtype), &m.kv_));
  FS_RETURN_IF_ERROR(m.kv_scales_.init(kv, &m.w_, &m.kv_));
  *out = std::move(m);
  return Status::Ok();
}

Status LlamaModel::calibrate_scales(int32_t layer, const float* k, const float* v, int64_t num_tokens) {
  const int32_t Hkv = config_.num_key_value_heads, D = config_.head_dim;
  std::vector<float> kmax(static_cast<size_t>(Hkv), 0.f), vmax(kmax.size(), 0.f);
  for (int32_t h = 0; h < Hkv; ++h) {
    for (int64_t t = 0; t < num_tokens; ++t) {
      for (int32_t d = 0; d < D; ++d) {  // NaN and inf ignored: they must not decide every later token's scale
        const int64_t i = (t * Hkv + h) * D + d;
        if (std::isfinite(k[i])) kmax[h] = std::max(kmax[h], std::fabs(k[i]));
        if (std::isfinite(v[i])) vmax[h] = std::max(vmax[h], std::fabs(v[i]));
      }
    }
  }
  return kv_scales_.calibrate(layer, kmax.data(), vmax.data(), &kv_);
}

// Hugging Face's rotary embedding: dims [0, D/2) and [D/2, D) form the pairs (rotate_half).
void LlamaModel::rope(float* x, int32_t num_heads, const int32_t* positions, int64_t num_tokens) const {
  const int32_t D = config_.head_dim, half = D / 2;
  for (int64_t t = 0; t < num_tokens; ++t) {
    for (int32_t i = 0; i < half; ++i) {
      const double angle = positions[t] * inv_freq_[i];
      const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
      for (int32_t h = 0; h < num_heads; ++h) {
        float* v = x + (t * num_heads + h) * D;
        const float a = v[i], b = v[i + half];
        v[i] = a * c - b * s;
        v[i + half] = b * c + a * s;
      }
    }
  }
}

void LlamaModel::qkv(const LayerWeights& l, const float* x, const int32_t* positions, int64_t t, float* h, float* q,
                     float* k, float* v) const {
  const LlamaConfig& c = config_;
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  rms_norm(x, l.input_norm, t, H, c.rms_norm_eps, h);
  linear(h, l.wq, t, Hq * D, H, q);
  linear(h, l.wk, t, Hkv * D, H, k);
  linear(h, l.wv, t, Hkv * D, H, v);
  rope(q, static_cast<int32_t>(Hq), positions, t);
  rope(k, static_cast<int32_t>(Hkv), positions, t);
}

void LlamaModel::mlp_block(const LayerWeights& l, float* x, int64_t t) const {
  const int64_t H = config_.hidden_size, I = config_.intermediate_size;
  std::vector<float> h(static_cast<size_t>(t * H)), gate(static_cast<size_t>(t * I)), up(gate.size()),
      down(static_cast<size_t>(t * H));
  rms_norm(x, l.post_norm, t, H, config_.rms_norm_eps, h.data());
  linear(h.data(), l.w_gate, t, I, H, gate.data());
  linear(h.data(), l.w_up, t, I, H, up.data());
  for (size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1.f + std::exp(-gate[i])) * up[i];  // SiLU · up
  linear(gate.data(), l.w_down, t, H, I, down.data());
  for (size_t i = 0; i < down.size(); ++i) x[i] += down[i];
}

Status LlamaModel::forward(const ForwardBatch& b, std::vector<float>* logits) {
  const LlamaConfig& c = config_;
  AttentionStep step;
  FS_RETURN_IF_ERROR(steps_.build(b, block_table_width(b.batch(), b.num_decode, b.block_table_stride), &step));
  const int32_t B = b.batch();
  const int64_t T = step.num_tokens;
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;

  std::vector<float> x(static_cast<size_t>(T * H)), h(x.size()), q(static_cast<size_t>(T * Hq * D)),
      k(static_cast<size_t>(T * Hkv * D)), v(k.size()), attn(q.size()), o(x.size());
  for (int64_t t = 0; t < T; ++t) std::copy_n(&w_.embed[b.tokens[t] * H], H, &x[t * H]);

  for (int32_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LayerWeights& l = w_.layers[layer];
    qkv(l, x.data(), step.positions.data(), T, h.data(), q.data(), k.data(), v.data());
    if (kv_scales_.needs_calibration(layer))  // the layer's first prefill fixes its scales
      FS_RETURN_IF_ERROR(calibrate_scales(layer, k.data(), v.data(), T));
    FS_RETURN_IF_ERROR(kv_.append(layer, 1, DType::kFloat32, k.data(), v.data(), b.slot_mapping.data(), T));
    const KVPageView pages = kv_.view(layer, step.block_tables, step.block_table_stride, b.seq_lens.data());
    if (step.num_decode > 0)  // split-K decode over the pages
      FS_RETURN_IF_ERROR(decode(step.decode_params(q.data(), attn.data(), pages)));
    if (step.num_prefill() > 0)  // varlen paged prefill of the prompt chunks
      FS_RETURN_IF_ERROR(prefill(step.prefill_params(q.data(), attn.data(), step.cu_prefill.data(), pages)));
    linear(attn.data(), l.wo, T, H, Hq * D, o.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    mlp_block(l, x.data(), T);
  }

  // Logits after each sequence's last new token.
  std::vector<float> last(static_cast<size_t>(B * H)), normed(last.size());
  for (int32_t s = 0; s < B; ++s) std::copy_n(&x[step.last_rows[s] * H], H, &last[s * H]);
  rms_norm(last.data(), w_.final_norm, B, H, c.rms_norm_eps, normed.data());
  logits->resize(static_cast<size_t>(B) * c.vocab_size);
  linear(normed.data(), w_.output(), B, c.vocab_size, H, logits->data());
  return Status::Ok();
}

Status LlamaModel::reference_forward(const std::vector<int32_t>& tokens, std::vector<float>* logits) const {
  const LlamaConfig& c = config_;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (T == 0) return invalid_argument("reference_forward: no tokens");
  const int64_t H = c.hidden_size, D = c.head_dim, Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int64_t group = Hq / Hkv;
  std::vector<int32_t> positions(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) positions[t] = static_cast<int32_t>(t);
  std::vector<float> x(static_cast<size_t>(T * H)), h(x.size()), q(static_cast<size_t>(T * Hq * D)),
      k(static_cast<size_t>(T * Hkv * D)), v(k.size()), attn(q.size()), o(x.size());
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= c.vocab_size) return out_of_range("reference_forward: token out of range");
    std::copy_n(&w_.embed[tokens[t] * H], H, &x[t * H]);
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> s(static_cast<size_t>(T));
  for (int32_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const LayerWeights& l = w_.layers[layer];
    qkv(l, x.data(), positions.data(), T, h.data(), q.data(), k.data(), v.data());
    for (int64_t head = 0; head < Hq; ++head) {
      const int64_t kvh = head / group;
      for (int64_t i = 0; i < T; ++i) {  // causal: keys 0..i
        double mx = -INFINITY;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[(i * Hq + head) * D + d]) * k[(j * Hkv + kvh) * D + d];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j <= i; ++j) sum += (s[j] = std::exp(s[j] - mx));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t j = 0; j <= i; ++j) acc += s[j] * v[(j * Hkv + kvh) * D + d];
          attn[(i * Hq + head) * D + d] = static_cast<float>(acc / sum);
        }
      }
    }
    linear(attn.data(), l.wo, T, H, Hq * D, o.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    mlp_block(l, x.data(), T);
  }
  std::vector<float> normed(x.size());
  rms_norm(x.data(), w_.final_norm, T, H, c.rms_norm_eps, normed.data());
  logits->resize(static_cast<size_t>(T) * c.vocab_size);
  linear(normed.data(), w_.output(), T, c.vocab_size, H, logits->data());
  return Status::Ok();
}

}  // namespace flashserve::model
