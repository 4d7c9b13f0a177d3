#include "server/model/cuda/llama_cuda.h"

#include <cublas_v2.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "attention/prefill.h"
#include "common/cuda_check.h"
#include "common/dtype.h"
#include "decode/decode.h"
#include "decode/planner.h"
#include "server/model/cuda/model_kernels.h"
#include "server/model/cuda/skinny_gemm.h"

namespace flashserve::model {

namespace {

Status cublas_status(cublasStatus_t s, const char* what) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return internal_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}

// Carves aligned pieces out of one allocation.
struct Arena {
  char* base = nullptr;
  int64_t used = 0;
  template <typename T>
  T* take(int64_t count) {
    used = (used + 255) / 256 * 256;
    T* p = reinterpret_cast<T*>(base ? base + used : nullptr);
    used += count * static_cast<int64_t>(sizeof(T));
    return p;
  }
};

// The pool's blocks when options.num_blocks is 0, asked once the weights and activation buffers
// (own_bytes) are allocated: the blocks of ks's shape in options.kv_cache_bytes, or else in
// options.gpu_memory_utilization of the device less what is in use now (then *memory is what
// cudaMemGetInfo said). Either must hold one sequence of max_seq_len tokens.
Status size_pool(const CudaModelOptions& options, int64_t max_seq_len, int64_t own_bytes, KVStorageShape* ks,
                 DeviceMemory* memory) {
  CacheSizing s;
  if (options.kv_cache_bytes > 0) {
    FS_RETURN_IF_ERROR(size_cache(options.kv_budget_name, options.kv_cache_bytes, *ks, max_seq_len, &s));
  } else {
    FS_RETURN_IF_ERROR(device_memory(options.device, own_bytes, memory));
    FS_RETURN_IF_ERROR(size_cache_for_utilization(options.kv_budget_name, options.gpu_memory_utilization, *memory, *ks,
                                                  max_seq_len, &s));
  }
  ks->num_blocks = s.num_blocks;
  return Status::Ok();
}

}  // namespace

LlamaCudaModel::~LlamaCudaModel() {
  if (stream_) cudaStreamSynchronize(stream_);  // no copy into a pinned buffer in flight (a step not ended)
  drop_graphs();
  if (meta_uploaded_) cudaEventSynchronize(meta_uploaded_);  // no copy out of meta_host_ in flight
  if (cublas_) cublasDestroy(static_cast<cublasHandle_t>(cublas_));
  if (stream_) cudaStreamDestroy(stream_);
  cudaFree(weights_);
  cudaFree(buffers_);
  cudaFree(workspace_);
  cudaFreeHost(meta_host_);
  if (meta_uploaded_) cudaEventDestroy(meta_uploaded_);
  for (auto& rec : records_) {
    for (cudaEvent_t e : rec.ev)
      if (e) cudaEventDestroy(e);
    cudaFreeHost(rec.asked_logits);
  }
}

Status LlamaCudaModel::create(const LlamaConfig& c, const LlamaWeights* hw, uint64_t seed,
                              const CudaModelOptions& opt, std::unique_ptr<LlamaCudaModel>* out) {
  FS_RETURN_IF_ERROR(c.validate());
  if (opt.max_tokens_per_step < 1 || opt.max_batch < 1) return invalid_argument("cuda model: bad step limits");
  if (opt.block_size < 1 || opt.num_blocks < 0) return invalid_argument("cuda model: bad block_size or num_blocks");
  FS_RETURN_IF_ERROR(opt.kv.validate());
  if (opt.kv.dtype != DType::kBFloat16 && !is_fp8(opt.kv.dtype))
    return unsupported(std::string("cuda model: a ") + dtype_name(opt.kv.dtype) +
                       " KV cache (the CUDA model's cache is bf16, fp8_e4m3 or fp8_e5m2)");
  std::unique_ptr<LlamaCudaModel> m(new LlamaCudaModel());
  m->config_ = c;
  m->opt_ = opt;
  // A pool sized from memory may have 50k blocks: its tables (and with them every CUDA graph's
  // split plan, cut for their width) are as wide as the longest sequence, the context length.
  if (m->opt_.max_blocks_per_seq == 0)
    m->opt_.max_blocks_per_seq = opt.num_blocks > 0 ? opt.num_blocks - 1
                                                    : (c.max_position_embeddings + opt.block_size - 1) / opt.block_size;
  FS_CUDA_RETURN_IF_ERROR(cudaSetDevice(opt.device));
  FS_CUDA_RETURN_IF_ERROR(cudaStreamCreateWithFlags(&m->stream_, cudaStreamNonBlocking));
  cublasHandle_t handle;
  FS_RETURN_IF_ERROR(cublas_status(cublasCreate(&handle), "cublasCreate"));
  m->cublas_ = handle;
  FS_RETURN_IF_ERROR(cublas_status(cublasSetStream(handle, m->stream_), "cublasSetStream"));
  FS_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(&m->meta_uploaded_, cudaEventDisableTiming));
  for (auto& rec : m->records_)
    for (cudaEvent_t& e : rec.ev) FS_CUDA_RETURN_IF_ERROR(cudaEventCreate(&e));  // timed
  m->steps_ = AttentionStepBuilder(c, Device::kCUDA, DType::kBFloat16);

  // Weights: sizes, then one allocation, then upload or generate.
  const int64_t H = c.hidden_size, I = c.intermediate_size, V = c.vocab_size;
  const int64_t Q = int64_t{c.num_attention_heads} * c.head_dim, KV = int64_t{c.num_key_value_heads} * c.head_dim;
  struct Piece {
    const __nv_bfloat16** slot;
    int64_t count;
    const std::vector<float>* host;       // the fp32 source (null: none)
    const std::vector<float>* host_second;  // w_gu: up after gate
    float mean, stddev;
  };
  std::vector<Piece> pieces;
  m->layers_.resize(static_cast<size_t>(c.num_hidden_layers));
  auto add = [&](const __nv_bfloat16** slot, int64_t count, const std::vector<float>* src, float mean, float sd,
                 const std::vector<float>* second = nullptr) { pieces.push_back({slot, count, src, second, mean, sd}); };
  add(&m->embed_, V * H, hw ? &hw->embed : nullptr, 0.f, 1.f);
  for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
    Layer& L = m->layers_[l];
    const LayerWeights* hl = hw ? &hw->layers[l] : nullptr;
    add(&L.in_norm, H, hl ? &hl->input_norm : nullptr, 1.f, 0.1f);
    add(&L.wq, Q * H, hl ? &hl->wq : nullptr, 0.f, 1.f / std::sqrt(static_cast<float>(H)));
    add(&L.wk, KV * H, hl ? &hl->wk : nullptr, 0.f, 1.f / std::sqrt(static_cast<float>(H)));
    add(&L.wv, KV * H, hl ? &hl->wv : nullptr, 0.f, 1.f / std::sqrt(static_cast<float>(H)));
    add(&L.wo, H * Q, hl ? &hl->wo : nullptr, 0.f, 1.f / std::sqrt(static_cast<float>(Q)));
    add(&L.post_norm, H, hl ? &hl->post_norm : nullptr, 1.f, 0.1f);
    add(&L.w_gu, 2 * I * H, hl ? &hl->w_gate : nullptr, 0.f, 1.f / std::sqrt(static_cast<float>(H)),
        hl ? &hl->w_up : nullptr);
    add(&L.w_down, H * I, hl ? &hl->w_down : nullptr, 0.f, 1.f / std::sqrt(static_cast<float>(I)));
  }
  add(&m->final_norm_, H, hw ? &hw->final_norm : nullptr, 1.f, 0.1f);
  if (!c.tie_word_embeddings) add(&m->lm_head_, V * H, hw ? &hw->lm_head : nullptr, 0.f, 1.f / std::sqrt(static_cast<float>(H)));
  Arena wa;
  for (const Piece& p : pieces) wa.take<__nv_bfloat16>(p.count);
  m->weight_bytes_ = wa.used;
  void* wptr = nullptr;
  FS_RETURN_IF_ERROR(flashserve::cuda_status(cudaMalloc(&wptr, static_cast<size_t>(wa.used)), "cudaMalloc (weights)"));
  m->weights_ = static_cast<char*>(wptr);
  wa = Arena{m->weights_, 0};
  std::vector<uint16_t> staging;
  uint64_t piece_seed = seed;
  for (const Piece& p : pieces) {
    __nv_bfloat16* dst = wa.take<__nv_bfloat16>(p.count);
    *p.slot = dst;
    if (p.host) {
      staging.resize(static_cast<size_t>(p.count));
      const int64_t first = static_cast<int64_t>(p.host->size());
      for (int64_t i = 0; i < first; ++i) staging[i] = float_to_bf16((*p.host)[i]);
      if (p.host_second)
        for (int64_t i = 0; i < p.count - first; ++i) staging[first + i] = float_to_bf16((*p.host_second)[i]);
      FS_CUDA_RETURN_IF_ERROR(cudaMemcpy(dst, staging.data(), static_cast<size_t>(p.count) * 2, cudaMemcpyHostToDevice));
    } else {
      FS_CUDA_RETURN_IF_ERROR(model::cuda::fill_normal(dst, p.count, p.mean, p.stddev, ++piece_seed, m->stream_));
    }
  }
  if (c.tie_word_embeddings) m->lm_head_ = m->embed_;

  // The activation buffers (with the skinny GEMMs' workspace, on or not: set_skinny_gemm; 16 MB
  // at the 8B model's shapes), then the KV storage (bf16 or FP8): a pool sized from memory gets
  // what the weights and the buffers leave.
  const int64_t T = opt.max_tokens_per_step, B = opt.max_batch;
  FS_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&m->sm_count_, cudaDevAttrMultiProcessorCount, opt.device));
  {
    const int64_t rows = std::min<int64_t>(32, std::max(T, B));
    for (auto [n, k] : {std::pair{Q + 2 * KV, H}, std::pair{H, Q}, std::pair{2 * I, H}, std::pair{H, I}, std::pair{V, H}}) {
      m->skinny_ws_.bytes =
          std::max(m->skinny_ws_.bytes, model::cuda::skinny_gemm_workspace_bytes(rows, n, k, m->sm_count_));
      m->skinny_ws_.counter_count = std::max(m->skinny_ws_.counter_count, model::cuda::skinny_gemm_counters(n));
    }
  }
  Arena ba;
  auto carve = [&](Arena& a) {
    m->x_ = a.take<float>(T * H);
    m->last_ = a.take<float>(B * H);
    m->logits_ = a.take<float>(B * V);
    m->inv_freq_ = a.take<float>(c.head_dim / 2);
    m->kv_amax_ = a.take<float>(2 * int64_t{c.num_key_value_heads});
    m->skinny_ws_.partials = a.take<char>(m->skinny_ws_.bytes);
    m->skinny_ws_.counters = a.take<unsigned>(m->skinny_ws_.counter_count);
    m->h_ = a.take<__nv_bfloat16>(T * H);
    m->q_ = a.take<__nv_bfloat16>(T * Q);
    m->k_ = a.take<__nv_bfloat16>(T * KV);
    m->v_ = a.take<__nv_bfloat16>(T * KV);
    m->attn_ = a.take<__nv_bfloat16>(T * Q);
    m->tmp_ = a.take<__nv_bfloat16>(T * H);
    m->gu_ = a.take<__nv_bfloat16>(T * 2 * I);
    m->act_ = a.take<__nv_bfloat16>(T * I);
    m->last_norm_ = a.take<__nv_bfloat16>(B * H);
    m->drawn_ = a.take<int32_t>(B);
    // The largest step's layout bounds every step's (the offsets grow with the sizes).
    // Then the draws' parameters, uploaded in the same copy (up to 8 banned ids a row; a step
    // with more has the sampler upload its own).
    m->meta_dev_bytes_ = (step_metadata_layout(T, static_cast<int32_t>(B), static_cast<int32_t>(B),
                                               m->opt_.max_blocks_per_seq)
                              .bytes +
                          StepMetadataLayout::kAlign - 1) /
                             StepMetadataLayout::kAlign * StepMetadataLayout::kAlign +
                         CudaSampler::prepared_bytes_bound(B, 8 * B);
    m->meta_dev_ = a.take<char>(m->meta_dev_bytes_);
  };
  carve(ba);
  void* bptr = nullptr;
  FS_RETURN_IF_ERROR(flashserve::cuda_status(cudaMalloc(&bptr, static_cast<size_t>(ba.used)), "cudaMalloc (activations)"));
  m->buffers_ = static_cast<char*>(bptr);
  ba = Arena{m->buffers_, 0};
  carve(ba);
  KVStorageShape ks;
  ks.num_layers = c.num_hidden_layers;
  ks.num_blocks = opt.num_blocks;
  ks.num_kv_heads = c.num_key_value_heads;
  ks.block_size = opt.block_size;
  ks.head_dim = c.head_dim;
  ks.dtype = opt.kv.dtype;
  if (ks.num_blocks == 0) {
    FS_RETURN_IF_ERROR(size_pool(opt, c.max_position_embeddings, m->weight_bytes_ + ba.used, &ks, &m->memory_at_sizing_));
    m->opt_.num_blocks = ks.num_blocks;
  }
  FS_RETURN_IF_ERROR(KVStorage::create(Device::kCUDA, ks, &m->kv_));
  FS_RETURN_IF_ERROR(m->kv_scales_.init(opt.kv, hw, &m->kv_));
  std::vector<float> inv(static_cast<size_t>(c.head_dim / 2));
  const auto f = c.inv_freq();
  for (size_t i = 0; i < inv.size(); ++i) inv[i] = static_cast<float>(f[i]);
  FS_CUDA_RETURN_IF_ERROR(cudaMemcpy(m->inv_freq_, inv.data(), inv.size() * 4, cudaMemcpyHostToDevice));
  // Skinny GEMMs (decode steps): QKV as one weight where the three are adjacent (the weight
  // arena's order), and a workspace for the largest of a step's calls at 32 tokens.
  // An environment variable that is exactly `on` or `off` sets a flag; anything else leaves it.
  auto env_flag = [](const char* name, const char* on, const char* off, bool* flag) {
    if (const char* env = std::getenv(name); env != nullptr && (!std::strcmp(env, on) || !std::strcmp(env, off)))
      *flag = !std::strcmp(env, on);
  };
  env_flag("FLASHSERVE_SKINNY_GEMM", "1", "0", &m->opt_.skinny_gemm);
  if (const char* env = std::getenv("FLASHSERVE_SKINNY_MAX_ROWS"); env != nullptr) {
    char* end = nullptr;
    const long rows = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && rows >= 1 && rows <= 32) m->opt_.skinny_max_rows = static_cast<int32_t>(rows);
  }
  env_flag("FLASHSERVE_MODEL_PDL", "1", "0", &m->opt_.pdl);
  env_flag("FLASHSERVE_MIXED_GRAPHS", "1", "0", &m->opt_.mixed_graphs);
  env_flag("FLASHSERVE_SKINNY_ROPE", "1", "0", &m->opt_.skinny_rope_append);
  env_flag("FLASHSERVE_GPU_LOGPROBS", "1", "0", &m->opt_.gpu_logprobs);
  env_flag("FLASHSERVE_SKINNY_NORM", "one", "two", &m->opt_.skinny_norm_one_launch);
  env_flag("FLASHSERVE_SKINNY_EPILOGUE", "launch", "fused", &m->opt_.skinny_launch_epilogue);
  // The one-launch norm's device query, here rather than inside a step's graph capture.
  if (m->opt_.skinny_norm_one_launch) (void)model::cuda::skinny_norm_one_launch_available();
  FS_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(m->skinny_ws_.counters, 0, m->skinny_ws_.counter_count * sizeof(unsigned),
                                          m->stream_));
  m->qkv_fused_ = true;
  for (const Layer& L : m->layers_) m->qkv_fused_ = m->qkv_fused_ && L.wk == L.wq + Q * H && L.wv == L.wk + KV * H;
  // The sampler's buffers for a full batch, so that a step's begin_step allocates nothing (an
  // allocation would wait for the step it follows).
  FS_RETURN_IF_ERROR(m->sampler_.reserve(B, 8 * B));
  FS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(m->stream_));
  *out = std::move(m);
  return Status::Ok();
}

// c[m, n] = a[m, k] · w[n, k]ᵀ, row-major; as cuBLAS sees it (column-major): cᵀ = w · aᵀ.
Status LlamaCudaModel::gemm(const __nv_bfloat16* a, const __nv_bfloat16* w, int64_t m, int64_t n, int64_t k, void* c,
                            bool fp32_out) {
  const float alpha = 1.f, beta = 0.f;
  return cublas_status(cublasGemmEx(static_cast<cublasHandle_t>(cublas_), CUBLAS_OP_T, CUBLAS_OP_N,
                                    static_cast<int>(n), static_cast<int>(m), static_cast<int>(k), &alpha, w,
                                    CUDA_R_16BF, static_cast<int>(k), a, CUDA_R_16BF, static_cast<int>(k), &beta, c,
                                    fp32_out ? CUDA_R_32F : CUDA_R_16BF, static_cast<int>(n), CUBLAS_COMPUTE_32F,
                                    CUBLAS_GEMM_DEFAULT),
                       "cublasGemmEx");
}

void LlamaCudaModel::drop_graphs() {
  for (auto& g : graphs_) cudaGraphExecDestroy(g.second.exec);
  graphs_.clear();
  mixed_graph_count_ = 0;
  mixed_seen_.clear();
}

// Each setter drops the captured graphs: they hold the other path's launches.
void LlamaCudaModel::set_skinny_gemm(bool on) {
  if (on != opt_.skinny_gemm) drop_graphs();
  opt_.skinny_gemm = on;
}

void LlamaCudaModel::set_skinny_launch_epilogue(bool on) {
  if (on != opt_.skinny_launch_epilogue) drop_graphs();
  opt_.skinny_launch_epilogue = on;
}

void LlamaCudaModel::set_skinny_rope_append(bool on) {
  if (on != opt_.skinny_rope_append) drop_graphs();
  opt_.skinny_rope_append = on;
}

bool LlamaCudaModel::skinny(int64_t m, int64_t n, int64_t k, int64_t lda, const void* a, const void* w) const {
  return opt_.skinny_gemm && m <= opt_.skinny_max_rows && skinny_ws_.partials != nullptr &&
         model::cuda::skinny_gemm_supported(m, n, k, lda, a, w) &&
         model::cuda::skinny_gemm_workspace_bytes(m, n, k, sm_count_) <= skinny_ws_.bytes;
}

// `count` dummy decode rows appended to p (its tables block_table_stride wide): token 0, one key,
// slot -1 (nothing appended), tables of the null block (whose key they read); their logits are
// nobody's. What padded_for_graph pads with and warm_up_graphs captures over.
static void append_dummy_rows(ForwardBatch* p, int32_t count) {
  p->num_decode += count;
  p->tokens.resize(p->tokens.size() + static_cast<size_t>(count), 0);
  if (p->cu_seqlens_q.empty()) p->cu_seqlens_q.push_back(0);
  for (int32_t i = 0; i < count; ++i) p->cu_seqlens_q.push_back(p->cu_seqlens_q.back() + 1);
  p->seq_lens.resize(p->seq_lens.size() + static_cast<size_t>(count), 1);
  p->slot_mapping.resize(p->tokens.size(), -1);
  p->block_tables.resize(p->seq_lens.size() * static_cast<size_t>(p->block_table_stride), 0);
}

// A decode batch padded to its graph's batch size (graph_batch_size) with dummy rows, its tables
// at `width`; the batch itself where no padding is needed and its tables are that wide. The
// padded copy reuses padded_'s buffers.
const ForwardBatch& LlamaCudaModel::padded_for_graph(const ForwardBatch& b, int64_t width) {
  // (A mixed step is not padded: its dummy rows would have to sit between its decodes and its
  // prompt chunks. Its tables are widened alone.)
  const int32_t B = b.batch(), Bp = b.num_decode == B ? graph_batch_size(B, graph_batch_cap()) : B;
  if (Bp == B && width == b.block_table_stride) return b;
  ForwardBatch& p = padded_;
  p.num_decode = b.num_decode;
  p.tokens.assign(b.tokens.begin(), b.tokens.end());
  p.cu_seqlens_q.assign(b.cu_seqlens_q.begin(), b.cu_seqlens_q.end());
  p.seq_lens.assign(b.seq_lens.begin(), b.seq_lens.end());
  p.slot_mapping.assign(b.slot_mapping.begin(), b.slot_mapping.end());
  p.block_table_stride = width;
  p.block_tables.assign(static_cast<size_t>(B * width), 0);
  for (int32_t r = 0; r < B; ++r)
    std::copy_n(b.block_tables.begin() + r * b.block_table_stride, b.block_table_stride,
                p.block_tables.begin() + r * width);
  append_dummy_rows(&p, Bp - B);
  return p;
}

Status LlamaCudaModel::warm_up_graphs(int32_t* captured) {
  if (captured != nullptr) *captured = 0;
  if (!opt_.cuda_graphs || kv_scales_.pending()) return Status::Ok();
  const int32_t cap = graph_batch_cap();
  std::vector<int32_t> sizes;
  for (int32_t b = 1; b <= cap; b = graph_batch_size(b, cap) + 1) sizes.push_back(graph_batch_size(b, cap));
  const int64_t width = graph_table_width(1, opt_.max_blocks_per_seq, opt_.block_size);
  auto dummies = [&](int32_t B) {
    ForwardBatch b;
    b.block_table_stride = width;
    append_dummy_rows(&b, B);
    return b;
  };
  // Every size's plan first, and the largest workspace among them, so that no capture is
  // dropped for a larger one later (a batch of one split has none: sizes do not order it).
  int64_t need = 0;
  for (int32_t B : sizes) {
    AttentionStep step;
    FS_RETURN_IF_ERROR(plan_step(dummies(B), width, true, &step));
    if (step.decode_planned) need = std::max(need, step.decode_plan.workspace_bytes);
  }
  FS_RETURN_IF_ERROR(reserve_workspace(need));
  const size_t before = graphs_.size();
  for (int32_t B : sizes) {
    FS_RETURN_IF_ERROR(forward_device(dummies(B)));
    if (!opt_.cuda_graphs) break;  // capture failed: the model runs eagerly from now on
  }
  FS_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(stream_));
  if (captured != nullptr) *captured = static_cast<int32_t>(graphs_.size() > before ? graphs_.size() - before : 0);
  return Status::Ok();
}

// The step's attention metadata (AttentionStepBuilder) with its decode rows planned for the split
// kernel's launch shape on this device (rows a CTA, CTAs an SM by the occupancy API, SMs). It is
// asked here, for steps with decode rows, rather than once at creation: the answer is cached per
// device (one lookup a step), and a model whose head_dim the decode kernel lacks is still created
// and refuses its first step (UNSUPPORTED). A graph step's planner is in graph mode, its splits
// cut for the tables' width (DecodePlanInput::graph_mode).
Status LlamaCudaModel::plan_step(const ForwardBatch& b, int64_t width, bool graph, AttentionStep* step,
                                 int32_t placeholder_rows) {
  DecodePlanning planning;
  if (b.num_decode > 0) {
    FS_RETURN_IF_ERROR(
        decode_launch_shape(Device::kCUDA, config_.head_dim, DType::kBFloat16, kv_.shape().dtype, &planning.shape));
    planning.block_size = opt_.block_size;
    if (graph) {
      planning.graph_mode = true;
      planning.max_seq_len = static_cast<int32_t>(width * opt_.block_size);
    }
  }
  FS_RETURN_IF_ERROR(steps_.build(b, width, b.num_decode > 0 ? &planning : nullptr, step, placeholder_rows));
  // A captured mixed step may not depend on its keys' count: the prefill's tile choice reads the
  // hint, which 0 leaves at the head dim's first tile (attention/cuda/prefill_cuda.cu, ws_tile_form).
  if (graph) step->prefill_keys = 0;
  return Status::Ok();
}

// The decode workspace at least `bytes`: a larger one moves it, and graphs captured with the old
// one are stale.
Status LlamaCudaModel::reserve_workspace(int64_t bytes) {
  if (bytes <= workspace_bytes_) return Status::Ok();
  drop_graphs();
  cudaFree(workspace_);
  workspace_ = nullptr;
  workspace_bytes_ = 0;
  FS_RETURN_IF_ERROR(
      flashserve::cuda_status(cudaMalloc(&workspace_, static_cast<size_t>(bytes)), "cudaMalloc (decode workspace)"));
  workspace_bytes_ = bytes;
  return Status::Ok();
}

Status LlamaCudaModel::forward_device(const ForwardBatch& batch, int32_t placeholder_rows, int64_t draw_bytes) {
  // A pure decode step replays a CUDA graph captured for its batch size (graph_batch_size: the
  // batch padded with dummy rows to a capture size) and table width (graph_table_width): block
  // tables are laid out at that width and the split plan is the planner's graph mode for it, so
  // the captured launches serve every later step of that size; only the metadata is uploaded.
  // (Tables wider than the model's buffers pass the builder and are refused just below.)
  // (An FP8 layer not yet calibrated waits for its amax on the host: such a step runs eagerly.)
  FS_RETURN_IF_ERROR(batch.validate(config_.vocab_size, placeholder_rows));  // before the padding reads it
  const bool graph = graph_step(batch.batch(), batch.num_decode) && !kv_scales_.pending();
  // The tables' width: a graph's (its key with the batch size), else the batch's own.
  const int64_t width =
      std::max(block_table_width(batch.batch(), batch.num_decode, batch.block_table_stride), batch.block_table_stride);
  const ForwardBatch& b = graph ? padded_for_graph(batch, width) : batch;
  const int32_t B = b.batch();
  AttentionStep step;
  FS_RETURN_IF_ERROR(plan_step(b, width, graph, &step, placeholder_rows));
  const int64_t T = step.num_tokens;
  if (T > opt_.max_tokens_per_step || B > opt_.max_batch || b.block_table_stride > opt_.max_blocks_per_seq)
    return invalid_argument("cuda model: the step is larger than the model's buffers");
  const StepMetadataLayout layout = step_metadata_layout(step);
  FS_RETURN_IF_ERROR(upload_metadata(b, step, layout, draw_bytes));
  if (timed_upload_ != nullptr && cudaEventRecord(timed_upload_, stream_) != cudaSuccess) {
    (void)cudaGetLastError();  // the step runs untimed
    upload_untimed_ = true;
  }
  StepArrays arrays;
  arrays.tokens = reinterpret_cast<const int32_t*>(meta_dev_ + layout.tokens);
  arrays.positions = reinterpret_cast<const int32_t*>(meta_dev_ + layout.positions);
  arrays.slots = reinterpret_cast<const int64_t*>(meta_dev_ + layout.slots);
  arrays.cu_prefill = reinterpret_cast<const int32_t*>(meta_dev_ + layout.cu_prefill);
  arrays.seq_lens = reinterpret_cast<const int32_t*>(meta_dev_ + layout.seq_lens);
  arrays.last_rows = reinterpret_cast<const int32_t*>(meta_dev_ + layout.last_rows);
  arrays.block_tables = reinterpret_cast<const int32_t*>(meta_dev_ + layout.block_tables);

  // The plan's workspace.
  if (step.decode_planned) FS_RETURN_IF_ERROR(reserve_workspace(step.decode_plan.workspace_bytes));
  if (!graph) return run_layers(step, arrays);
  const bool mixed = b.num_decode != B;
  GraphKey key{B, width, step.cu_prefill};
  auto it = graphs_.find(key);
  if (it == graphs_.end() && mixed) {  // captured the second time it comes, within the cap
    if (mixed_graph_count_ >= kMaxMixedGraphs) return run_layers(step, arrays);
    if (mixed_seen_.size() >= 1024) mixed_seen_.clear();
    if (mixed_seen_.insert(key).second) return run_layers(step, arrays);
  }
  if (it != graphs_.end() && !(it->second.layout == layout)) {
    // Not expected: a pure decode step of B sequences at the graph's width has one layout (its
    // offsets depend only on the sizes). Were it to differ, the captured launches would read
    // the wrong offsets of meta_dev_, so capture again.
    cudaGraphExecDestroy(it->second.exec);
    graphs_.erase(it);
    mixed_graph_count_ -= mixed ? 1 : 0;
    it = graphs_.end();
  }
  if (it == graphs_.end()) {
    cudaGraph_t g = nullptr;
    FS_CUDA_RETURN_IF_ERROR(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const Status st = run_layers(step, arrays);
    const cudaError_t end = cudaStreamEndCapture(stream_, &g);
    cudaGraphExec_t exec = nullptr;
    cudaError_t inst = cudaErrorUnknown;
    if (st.ok() && end == cudaSuccess) inst = cudaGraphInstantiate(&exec, g, 0);
    if (g) cudaGraphDestroy(g);
    if (inst != cudaSuccess) {
      // Something in the step would not capture: run without graphs from now on.
      cudaGetLastError();
      opt_.cuda_graphs = false;
      return run_layers(step, arrays);
    }
    it = graphs_.emplace(std::move(key), Graph{exec, layout}).first;
    mixed_graph_count_ += mixed ? 1 : 0;
  }
  return flashserve::cuda_status(cudaGraphLaunch(it->second.exec, stream_), "cudaGraphLaunch");
}

// Why reusing the pinned buffer is safe: the copy of step N reads meta_host_ asynchronously, when
// stream_ reaches it, so step N+1 must not write meta_host_ (nor free it to grow it) before that
// copy has run. meta_uploaded_, recorded on stream_ right after the copy, marks it;
// cudaEventSynchronize on it waits for the copy alone, not for step N's kernels (queued after the
// event). forward() and end_step() wait for stream_'s work before they return (the logits or the
// sampled tokens come back), so by the next step the event has long completed and the wait
// returns at once; forward_device() and begin_step() return with the step in flight (bench_model,
// and the engine between begin_step and end_step), and then it waits.
// The device buffer needs no such care: the next upload into meta_dev_ is queued on stream_
// behind every kernel of the step that reads it. The upload is never inside a graph capture (it
// precedes cudaStreamBeginCapture), so graphs replay the kernels over the fixed meta_dev_.
Status LlamaCudaModel::upload_metadata(const ForwardBatch& b, const AttentionStep& step,
                                       const StepMetadataLayout& layout, int64_t draw_bytes) {
  FS_RETURN_IF_ERROR(flashserve::cuda_status(cudaEventSynchronize(meta_uploaded_), "upload (previous step's)"));
  if (layout.bytes > meta_dev_bytes_) return internal_error("cuda model: step metadata larger than its buffer");
  // The draws' parameters behind the metadata, where they fit.
  const int64_t draws_at =
      (layout.bytes + StepMetadataLayout::kAlign - 1) / StepMetadataLayout::kAlign * StepMetadataLayout::kAlign;
  draws_at_ = draw_bytes > 0 && draws_at + draw_bytes <= meta_dev_bytes_ ? draws_at : -1;
  const int64_t total = draws_at_ >= 0 ? draws_at + draw_bytes : layout.bytes;
  if (total > meta_host_bytes_) {
    // Doubling, up to the largest step's size: a few growths in a server's life.
    const int64_t bytes = std::max(total, std::min(2 * meta_host_bytes_, meta_dev_bytes_));
    cudaFreeHost(meta_host_);
    meta_host_ = nullptr;
    meta_host_bytes_ = 0;
    void* p = nullptr;
    FS_RETURN_IF_ERROR(
        flashserve::cuda_status(cudaMallocHost(&p, static_cast<size_t>(bytes)), "cudaMallocHost (step metadata)"));
    meta_host_ = static_cast<char*>(p);
    meta_host_bytes_ = bytes;
  }
  write_step_metadata(b, step, layout, meta_host_);
  if (draws_at_ >= 0) sampler_.write_prepared(meta_host_ + draws_at_);
  FS_RETURN_IF_ERROR(flashserve::cuda_status(
      cudaMemcpyAsync(meta_dev_, meta_host_, static_cast<size_t>(total), cudaMemcpyHostToDevice, stream_), "upload"));
  return flashserve::cuda_status(cudaEventRecord(meta_uploaded_, stream_), "upload");
}

// The step's launches, all on stream_ (capturable): metadata is already on the device.
Status LlamaCudaModel::run_layers(const AttentionStep& step, const StepArrays& a) {
  const LlamaConfig& c = config_;
  const int64_t H = c.hidden_size, I = c.intermediate_size, D = c.head_dim;
  const int64_t Hq = c.num_attention_heads, Hkv = c.num_key_value_heads;
  const int64_t T = step.num_tokens;
  const int32_t B = step.batch;
  const float eps = static_cast<float>(c.rms_norm_eps);
  FS_CUDA_RETURN_IF_ERROR(model::cuda::embed_gather(embed_, a.tokens, drawn_, T, H, x_, stream_));
  // Skinny GEMMs (a decode step, opt_.skinny_gemm): each where its shapes allow, else cuBLAS;
  // their epilogues do the residual adds, the norms after them (h_ready: the next layer's input
  // norm is in h_ already) and SwiGLU.
  using model::cuda::SkinnyEpilogue;
  using model::cuda::SkinnyOutput;
  auto skinny_call = [&](const __nv_bfloat16* in, int64_t lda, const __nv_bfloat16* w, int64_t rows, int64_t n,
                         int64_t k, SkinnyOutput out) {
    ++skinny_calls_;
    out.launch_epilogue = opt_.skinny_launch_epilogue;
    return model::cuda::skinny_gemm(in, lda, w, rows, n, k, out, skinny_ws_, sm_count_, stream_);
  };
  auto residual = [&](const __nv_bfloat16* norm) {
    SkinnyOutput o;
    o.kind = SkinnyEpilogue::kResidual;
    o.residual = x_;
    o.norm_weight = norm;
    o.normed = norm != nullptr ? h_ : nullptr;
    o.eps = eps;
    o.norm_one_launch = opt_.skinny_norm_one_launch;
    return o;
  };
  bool h_ready = false;
  for (int32_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    const Layer& L = layers_[layer];
    if (!h_ready) FS_CUDA_RETURN_IF_ERROR(model::cuda::rms_norm(x_, L.in_norm, T, H, eps, h_, stream_, opt_.pdl));
    h_ready = false;
    // The layer's pages (the decode rows' tables first, then the prefill rows').
    const KVPageView pages = kv_.view(layer, a.block_tables, step.block_table_stride, a.seq_lens);
    // An FP8 layer's first write calibrates its scales first: rotary alone, the amax of the
    // rotated K and of V, then KVStorage's quantizing append.
    const bool calibrate = kv_scales_.needs_calibration(layer);
    // Rotary on q and k and the new K/V into their slots (the cache layout is the project's,
    // [blocks, 2, kv_heads, block_size, head_dim], as KVStorage allocates it; an FP8 cache
    // quantized there too): in the fused QKV GEMM's epilogue (opt_.skinny_rope_append) or by
    // rope_append after the projections, one launch either way.
    bool roped = false;
    if (qkv_fused_ && skinny(T, (Hq + 2 * Hkv) * D, H, H, h_, L.wq)) {
      SkinnyOutput o;  // one GEMM over [wq; wk; wv], its columns into q_, k_, v_
      o.out[0] = q_;
      o.out[1] = k_;
      o.out[2] = v_;
      o.cols[0] = Hq * D;
      o.cols[1] = o.cols[2] = Hkv * D;
      if (opt_.skinny_rope_append && !calibrate) {
        o.kind = SkinnyEpilogue::kRopeAppend;
        o.positions = a.positions;
        o.inv_freq = inv_freq_;
        o.slots = a.slots;
        o.head_dim = static_cast<int32_t>(D);
        o.pages = pages;
        o.append = true;
        roped = true;
        ++skinny_rope_calls_;
      }
      FS_RETURN_IF_ERROR(skinny_call(h_, H, L.wq, T, (Hq + 2 * Hkv) * D, H, o));
    } else {
      FS_RETURN_IF_ERROR(gemm(h_, L.wq, T, Hq * D, H, q_, false));
      FS_RETURN_IF_ERROR(gemm(h_, L.wk, T, Hkv * D, H, k_, false));
      FS_RETURN_IF_ERROR(gemm(h_, L.wv, T, Hkv * D, H, v_, false));
    }
    if (!roped)
      FS_CUDA_RETURN_IF_ERROR(model::cuda::rope_append(q_, k_, v_, a.positions, inv_freq_, a.slots, T,
                                                       static_cast<int32_t>(Hq), static_cast<int32_t>(Hkv),
                                                       static_cast<int32_t>(D), pages, /*append=*/!calibrate,
                                                       stream_, opt_.pdl));
    if (calibrate) {
      FS_RETURN_IF_ERROR(calibrate_layer(layer, T));
      FS_RETURN_IF_ERROR(kv_.append(layer, 1, DType::kBFloat16, k_, v_, a.slots, T, stream_));
    }
    if (step.num_decode > 0) {
      DecodeParams d = step.decode_params(q_, attn_, pages);  // the step's plan
      d.workspace = workspace_;
      d.workspace_bytes = workspace_bytes_;
      FS_RETURN_IF_ERROR(decode(d, stream_));
    }
    if (step.num_prefill() > 0)
      FS_RETURN_IF_ERROR(prefill(step.prefill_params(q_, attn_, a.cu_prefill, pages), stream_));
    if (skinny(T, H, Hq * D, Hq * D, attn_, L.wo)) {
      FS_RETURN_IF_ERROR(skinny_call(attn_, Hq * D, L.wo, T, H, Hq * D, residual(L.post_norm)));
    } else {
      FS_RETURN_IF_ERROR(gemm(attn_, L.wo, T, H, Hq * D, tmp_, false));
      FS_CUDA_RETURN_IF_ERROR(model::cuda::add_into(x_, tmp_, T * H, stream_));
      FS_CUDA_RETURN_IF_ERROR(model::cuda::rms_norm(x_, L.post_norm, T, H, eps, h_, stream_, opt_.pdl));
    }
    if (skinny(T, 2 * I, H, H, h_, L.w_gu)) {
      SkinnyOutput o;
      o.kind = SkinnyEpilogue::kSwiGLU;
      o.act = act_;
      FS_RETURN_IF_ERROR(skinny_call(h_, H, L.w_gu, T, 2 * I, H, o));
    } else {
      FS_RETURN_IF_ERROR(gemm(h_, L.w_gu, T, 2 * I, H, gu_, false));
      FS_CUDA_RETURN_IF_ERROR(model::cuda::silu_mul(gu_, T, I, act_, stream_));
    }
    if (skinny(T, H, I, I, act_, L.w_down)) {
      const bool last = layer + 1 == c.num_hidden_layers;
      FS_RETURN_IF_ERROR(skinny_call(act_, I, L.w_down, T, H, I, residual(last ? nullptr : layers_[layer + 1].in_norm)));
      h_ready = !last;
    } else {
      FS_RETURN_IF_ERROR(gemm(act_, L.w_down, T, H, I, tmp_, false));
      FS_CUDA_RETURN_IF_ERROR(model::cuda::add_into(x_, tmp_, T * H, stream_));
    }
  }
  FS_CUDA_RETURN_IF_ERROR(model::cuda::gather_rows(x_, a.last_rows, B, H, last_, stream_, opt_.pdl));
  FS_CUDA_RETURN_IF_ERROR(model::cuda::rms_norm(last_, final_norm_, B, H, eps, last_norm_, stream_, opt_.pdl));
  if (opt_.skinny_lm_head && skinny(B, c.vocab_size, H, H, last_norm_, lm_head_)) {
    SkinnyOutput o;
    o.kind = SkinnyEpilogue::kFp32;
    o.out_fp32 = logits_;
    return skinny_call(last_norm_, H, lm_head_, B, c.vocab_size, H, o);
  }
  return gemm(last_norm_, lm_head_, B, c.vocab_size, H, logits_, true);
}

Status LlamaCudaModel::calibrate_layer(int32_t layer, int64_t num_tokens) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  FS_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream_, &capture));
  if (capture != cudaStreamCaptureStatusNone)
    return internal_error("cuda model: FP8 scales calibrated inside a graph capture (layer " + std::to_string(layer) + ")");
  const int32_t Hkv = config_.num_key_value_heads;
  FS_CUDA_RETURN_IF_ERROR(model::cuda::kv_amax(k_, v_, num_tokens, Hkv, config_.head_dim, kv_amax_, stream_));
  std::vector<float> amax(2 * static_cast<size_t>(Hkv));
  FS_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(amax.data(), kv_amax_, amax.size() * 4, cudaMemcpyDeviceToHost, stream_));
  FS_RETURN_IF_ERROR(flashserve::cuda_status(cudaStreamSynchronize(stream_), "FP8 scale calibration"));
  return kv_scales_.calibrate(layer, amax.data(), amax.data() + Hkv, &kv_);
}

Status LlamaCudaModel::forward_and_sample(const ForwardBatch& b, const std::vector<SampleRow>& rows,
                                          std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs) {
  if (begun_ != ended_) return internal_error("forward_and_sample: a step is in flight (end it first)");
  FS_RETURN_IF_ERROR(begin_step(b, rows));
  return end_step(tokens, logprobs);
}

// begin_step's, for logprobs on the host: the asking rows' logits (rec->asks >= 0), one copy a run
// of consecutive asking rows, packed into the record's pinned buffer (grown when needed: a copy
// into pageable memory would wait for the step, and the next step's host work with it).
Status LlamaCudaModel::copy_asked_logits(StepRecord* rec) {
  const int64_t V = config_.vocab_size, B = static_cast<int64_t>(rec->asks.size());
  int64_t asking = 0;
  for (int32_t a : rec->asks) asking += a >= 0;
  if (asking * V > rec->asked_capacity) {
    cudaFreeHost(rec->asked_logits);  // (its last copy is done: its step was ended)
    rec->asked_logits = nullptr;
    rec->asked_capacity = 0;
    void* p = nullptr;
    FS_RETURN_IF_ERROR(flashserve::cuda_status(cudaMallocHost(&p, static_cast<size_t>(asking * V) * sizeof(float)),
                                               "cudaMallocHost (logprobs)"));
    rec->asked_logits = static_cast<float*>(p);
    rec->asked_capacity = asking * V;
  }
  for (int64_t row = 0, packed = 0; row < B;) {
    if (rec->asks[row] < 0) {
      ++row;
      continue;
    }
    int64_t end = row + 1;
    while (end < B && rec->asks[end] >= 0) ++end;
    FS_RETURN_IF_ERROR(flashserve::cuda_status(
        cudaMemcpyAsync(rec->asked_logits + packed * V, logits_ + row * V,
                        static_cast<size_t>((end - row) * V) * sizeof(float), cudaMemcpyDeviceToHost, stream_),
        "logprobs"));
    packed += end - row;
    row = end;
  }
  return Status::Ok();
}

Status LlamaCudaModel::begin_step(const ForwardBatch& b, const std::vector<SampleRow>& rows) {
  if (static_cast<int32_t>(rows.size()) != b.batch()) return invalid_argument("forward_and_sample: one row a sequence");
  if (begun_ - ended_ >= 2) return internal_error("begin_step: two steps begun and not ended");
  // The step's device timing (last_step_device_time): a step that fails is not timed, nor is the
  // one after it timed from it.
  // Event errors leave the step untimed (and cleared: a later launch check must not see them).
  StepRecord& rec = records_[begun_ % 3];
  auto record = [&](cudaEvent_t e) {
    if (cudaEventRecord(e, stream_) == cudaSuccess) return true;
    (void)cudaGetLastError();
    return false;
  };
  rec.timed = record(rec.ev[0]);
  timed_upload_ = rec.timed ? rec.ev[1] : nullptr;
  upload_untimed_ = false;
  // The draws' parameters go up with the step's metadata, in one copy (issue 27: one pinned
  // upload a step). Placeholders name the last begun step's draws, in drawn_ (the sampler's
  // second output).
  int64_t draw_bytes = 0;
  Status st = sampler_.prepare(config_.vocab_size, rows, opt_.gpu_logprobs, &draw_bytes);
  if (st.ok()) st = forward_device(b, drawn_rows_, draw_bytes);
  timed_upload_ = nullptr;
  drawn_rows_ = 0;  // a step that fails leaves no draws for placeholders to name
  if (st.ok()) {
    rec.asks.resize(rows.size());  // end_step's: the rows' logprobs asks (not their banned lists)
    for (size_t i = 0; i < rows.size(); ++i) rec.asks[i] = rows[i].logprobs;
    // Logprobs on the host (opt_.gpu_logprobs off, or a row asking for more than the device path
    // takes): the asking rows' logits copied back now, before the draws (whose copy back end_step
    // waits for) and before a step begun next overwrites logits_.
    if (!sampler_.prepared_device_logprobs()) st = copy_asked_logits(&rec);
  }
  if (st.ok())
    st = sampler_.launch_prepared(logits_, stream_, drawn_, draws_at_ >= 0 ? meta_dev_ + draws_at_ : nullptr);
  rec.timed = rec.timed && !upload_untimed_ && st.ok() && record(rec.ev[2]);
  if (!st.ok()) {
    // Whatever was queued (the logits' copies into the record's pinned buffer) is done before the
    // record is reused.
    (void)cudaStreamSynchronize(stream_);
    (void)cudaGetLastError();
    prev_step_timed_ = false;
    last_device_time_valid_ = false;  // last_step_device_time: the failed step has no timing
    return st;
  }
  drawn_rows_ = static_cast<int32_t>(rows.size());
  ++begun_;
  return Status::Ok();
}

bool LlamaCudaModel::last_step_device_time(StepDeviceTime* t) const {
  if (!last_device_time_valid_) return false;
  *t = last_device_time_;
  return true;
}

// After the draws' copy back (end_step): the step's spans from its events, and from the step
// before's last event where that step was timed too (`before`: its record, which the ring of
// three keeps while the step after this one is in flight). Event errors only leave the step
// untimed.
Status LlamaCudaModel::record_device_time(const StepRecord& rec, const StepRecord& before) {
  last_device_time_valid_ = false;
  if (!rec.timed) {
    prev_step_timed_ = false;
    return Status::Ok();
  }
  FS_CUDA_RETURN_IF_ERROR(cudaEventSynchronize(rec.ev[2]));  // recorded right after the draws' copy: at once
  float prepare = 0.f, run = 0.f, idle = 0.f;
  bool ok = cudaEventElapsedTime(&prepare, rec.ev[0], rec.ev[1]) == cudaSuccess &&
            cudaEventElapsedTime(&run, rec.ev[1], rec.ev[2]) == cudaSuccess;
  if (ok && prev_step_timed_) ok = cudaEventElapsedTime(&idle, before.ev[2], rec.ev[0]) == cudaSuccess;
  if (!ok) {
    (void)cudaGetLastError();
    prev_step_timed_ = false;
    return Status::Ok();
  }
  // (Overlapped, the next step's start is queued before this one ends: its idle is ~0 and its
  // prepare is the upload's copy alone, as the device sees them.)
  last_device_time_ = {std::max(idle, 0.f) * 1e-3, prepare * 1e-3, run * 1e-3};
  last_device_time_valid_ = true;
  prev_step_timed_ = true;
  return Status::Ok();
}

Status LlamaCudaModel::end_step(std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs) {
  if (ended_ == begun_) return internal_error("end_step: no step begun");
  const StepRecord& rec = records_[ended_ % 3];
  const StepRecord& before = records_[(ended_ + 2) % 3];
  ++ended_;
  if (Status fs = sampler_.finish(tokens, logprobs); !fs.ok()) {
    prev_step_timed_ = false;
    return fs;
  }
  FS_RETURN_IF_ERROR(record_device_time(rec, before));
  if (logprobs == nullptr || sampler_.logprobs_ready()) return Status::Ok();  // none wanted, or made on the device
  // On the host, from the asking rows' logits begin_step copied back (before the draws, whose copy
  // the sampler's finish waited for).
  const std::vector<int32_t>& asks = rec.asks;
  const int64_t V = config_.vocab_size, B = static_cast<int64_t>(asks.size());
  logprobs->assign(asks.size(), TokenLogprobs{});
  for (int64_t row = 0, packed = 0; row < B; ++row)
    if (asks[row] >= 0)
      (*logprobs)[row] = token_logprobs(rec.asked_logits + packed++ * V, static_cast<int32_t>(V), (*tokens)[row],
                                        asks[row]);
  return Status::Ok();
}

Status LlamaCudaModel::forward(const ForwardBatch& b, std::vector<float>* logits) {
  FS_RETURN_IF_ERROR(forward_device(b));
  logits->resize(static_cast<size_t>(b.batch()) * config_.vocab_size);
  FS_CUDA_RETURN_IF_ERROR(
      cudaMemcpyAsync(logits->data(), logits_, logits->size() * 4, cudaMemcpyDeviceToHost, stream_));
  return flashserve::cuda_status(cudaStreamSynchronize(stream_), "forward");
}

}  // namespace flashserve::model
