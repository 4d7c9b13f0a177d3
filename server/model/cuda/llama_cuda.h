// The Llama decoder on a CUDA GPU in bf16 (fp32 residual stream and accumulation): cuBLAS
// GEMMs (bf16 in, fp32 compute), small kernels for embedding, RMSNorm, rotary, SwiGLU and the
// residual adds, K/V appended into a bf16 or FP8 KVStorage on the device, prompt chunks to the
// CUDA varlen paged prefill kernel and decode tokens to the split-K decode kernel.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "common/status.h"
#include "decode/planner.h"
#include "kvcache/kv_storage.h"
#include "kvcache/sizing.h"
#include "server/model/attention_step.h"
#include "server/model/graph_shapes.h"
#include "server/model/cuda/sampler_cuda.h"
#include "server/model/cuda/skinny_gemm.h"
#include "server/model/kv_cache_options.h"
#include "server/model/model.h"
#include "server/model/weights.h"

namespace flashserve::model {

struct CudaModelOptions {
  int32_t num_blocks = 0;               // KV blocks (incl. the null block); 0: sized from memory
  // With num_blocks 0 the pool is sized after the weights and activation buffers are allocated,
  // to hold at least one sequence of the context length (kvcache/sizing.h):
  int64_t kv_cache_bytes = 0;           // > 0: the blocks that fit in this many bytes
  double gpu_memory_utilization = 0.9;  // else: this fraction of the device, less what is in use
  std::string kv_budget_name = "kv cache";  // begins sizing errors (the server: its flag)
  int32_t block_size = 16;
  int32_t max_tokens_per_step = 4096;   // sizes the activation buffers
  int32_t max_batch = 256;
  int32_t max_blocks_per_seq = 0;       // 0: num_blocks - 1; a pool sized from memory: the context's
  int device = 0;
  bool cuda_graphs = true;              // replay captured graphs for pure decode steps
  // Mixed steps (decodes and prompt chunks; not prompts alone) replayed as graphs too, one a
  // (batch, table width, prompt-chunk lengths), captured the second time a shape comes (a capture
  // costs several steps' launches), at most kMaxMixedGraphs of them (issue 27's "try graphs for
  // mixed steps of fixed shape": bench_model --mixed times it). Under capture the prefill takes
  // one CTA an item and 128-key tiles (no dynamic walk, no key count on the host).
  // Off: an experiment until measured (session 28, no GPU). FLASHSERVE_MIXED_GRAPHS=1 or 0, read
  // at create, overrides this.
  bool mixed_graphs = false;
  // Steps of at most skinny_max_rows tokens (decode) take the layers' projections by skinny_gemm
  // (skinny_gemm.h: the weights streamed once, QKV as one GEMM, the residual add + RMSNorm and
  // SwiGLU in its epilogues) instead of cuBLAS. Measured on the H200 (bench/NOTES.md "Skinny
  // GEMMs"): the decode step 0.91x cuBLAS's at 1 token, 0.93x at 16, 1.02x at 32, so on for up
  // to 16 rows. FLASHSERVE_SKINNY_GEMM=1 or 0 and FLASHSERVE_SKINNY_MAX_ROWS=1..32 (other values
  // are ignored), read at create, override these.
  bool skinny_gemm = true;
  int32_t skinny_max_rows = 16;
  // Their epilogues in launches of their own (measured faster: the in-launch reductions run
  // serially at each GEMM's tail), or inside the GEMM's launch where they can be
  // (FLASHSERVE_SKINNY_EPILOGUE=launch or fused, read at create, overrides this).
  bool skinny_launch_epilogue = true;
  // Rotary + the K/V append in the fused QKV GEMM's epilogue (SkinnyEpilogue::kRopeAppend: the
  // same bits as rope_append after it, one launch a layer fewer). Off until measured on the GPU
  // (written in session 27 without one). FLASHSERVE_SKINNY_ROPE=1 or 0, read at create, overrides this.
  bool skinny_rope_append = false;
  // The residual add + RMSNorm after o and down in one launch, a cluster of blocks a row
  // (SkinnyOutput::norm_one_launch, sm_90+), instead of two. Off until measured (session 27, no GPU).
  // FLASHSERVE_SKINNY_NORM=one or two, read at create, overrides this.
  bool skinny_norm_one_launch = false;
  // lm_head by skinny_gemm too (fp32 logits): off, since cuBLAS alone reads it at 93% of the
  // bandwidth (254 us against 284-287 at 1 row) and it has no epilogue to fuse.
  bool skinny_lm_head = false;
  // The step's small kernels (RMSNorm, rotary + append, the last rows' gather) launched as
  // programmatic dependents on sm_90+ (each waits on the device for the kernel before it and
  // lets the next start its CTAs: a skinny GEMM's load its first weights meanwhile), as the
  // skinny GEMMs and decode are: ~1% of the decode step (H200, session 26: 5.011-5.047 against
  // 5.064 ms at (1,1k); bench/NOTES.md). FLASHSERVE_MODEL_PDL=1 or 0, read at create, overrides this.
  bool pdl = true;
  // The log-probabilities of the rows that ask (SampleRow::logprobs up to 20) computed on the
  // device after the draw (CudaSampler's logprobs kernel: a few rows' numbers come back) instead
  // of their whole logits copied back and scanned on the host (~0.5-1 ms a row at 128k, on the
  // step thread). Off until a GPU has run it (session 27). FLASHSERVE_GPU_LOGPROBS=1 or 0, read
  // at create, overrides this.
  bool gpu_logprobs = false;
  // The cache's dtype (bf16, fp8_e4m3 or fp8_e5m2) and, for FP8, its scales' policy
  // (kv_cache_options.h).
  KvCacheOptions kv = {DType::kBFloat16};
};

class LlamaCudaModel : public Model {
 public:
  // host_weights: the weights to upload (fp32 → bf16); null: synthetic weights generated on
  // the device from `seed` (for load tests at full size).
  static Status create(const LlamaConfig& config, const LlamaWeights* host_weights, uint64_t seed,
                       const CudaModelOptions& options, std::unique_ptr<LlamaCudaModel>* out);
  ~LlamaCudaModel() override;

  const LlamaConfig& config() const override { return config_; }
  const KVStorageShape& kv_shape() const override { return kv_.shape(); }
  KVStorage& kv() { return kv_; }
  // FP8 caches: whether each layer's scales are fixed yet, and where they came from.
  const KvScales& kv_scales() const { return kv_scales_; }
  Status forward(const ForwardBatch& batch, std::vector<float>* logits) override;
  Status copy_blocks(const BlockCopy* pairs, int32_t n) override { return kv_.copy_blocks(pairs, n, stream_); }
  // A pure decode step replays a CUDA graph (graph_step): its tables are graph_table_width wide.
  int64_t block_table_width(int32_t batch, int32_t num_decode, int64_t widest_table) const override {
    return graph_step(batch, num_decode) ? graph_table_width(widest_table, opt_.max_blocks_per_seq, opt_.block_size)
                                         : widest_table;
  }
  // Samples on the device: only the tokens come back, and the logits of the rows that ask for
  // logprobs where they are computed on the host (those rows alone; the step and its graph are
  // the same). With no step in flight (begin_step then end_step).
  Status forward_and_sample(const ForwardBatch& batch, const std::vector<SampleRow>& rows,
                            std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs = nullptr) override;
  // The step and its draws launched on the device (begin_step returns once they are queued, or
  // at the first host wait a step needs: an FP8 layer's calibration); end_step waits for the
  // oldest begun step's tokens (and computes the logprobs asked on the host). A step's placeholders read the step
  // before's draws on the device (the sampler writes them to drawn_ too; the embedding gather
  // reads them there), so step n + 1 is queued behind step n before step n's tokens are back.
  Status begin_step(const ForwardBatch& batch, const std::vector<SampleRow>& rows) override;
  Status end_step(std::vector<int32_t>* tokens, std::vector<TokenLogprobs>* logprobs) override;
  bool async_steps() const override { return true; }
  bool last_step_device_time(StepDeviceTime* t) const override;
  void break_step_timing() override { prev_step_timed_ = false; }

  // The step without copying logits back: they stay on the device ([batch, vocab] fp32).
  // begin_step's: placeholder_rows, the rows of drawn_ its placeholders may name; draw_bytes, the
  // sampler's prepared parameters to upload with the metadata (CudaSampler::prepare).
  Status forward_device(const ForwardBatch& batch, int32_t placeholder_rows = 0, int64_t draw_bytes = 0);
  const float* logits_device() const { return logits_; }
  cudaStream_t stream() const { return stream_; }
  bool graph_step(int32_t batch, int32_t num_decode) const {
    return opt_.cuda_graphs && batch > 0 && (num_decode == batch || (opt_.mixed_graphs && num_decode > 0));
  }
  static constexpr size_t kMaxMixedGraphs = 64;  // past it, a new mixed shape runs eagerly
  // Graphs captured so far (one a padded batch size and table width).
  size_t graph_count() const { return graphs_.size(); }
  // Captures (and runs once) the decode graph of every capture size up to max_batch at the
  // narrowest width (graph_table_width's floor: contexts to 8k tokens) over dummy rows, largest
  // first (whose decode workspace the smaller ones then fit), so that serving does not stop for
  // a capture the first time each batch size comes; wider contexts still capture on first use.
  // Nothing is written to the cache. Skipped without graphs, and while an FP8 cache has layers
  // to calibrate (their first write would calibrate on the dummies). Returns the graphs made.
  Status warm_up_graphs(int32_t* captured = nullptr);
  void set_cuda_graphs(bool on) { opt_.cuda_graphs = on; }
  void set_mixed_graphs(bool on) { opt_.mixed_graphs = on; }
  // Skinny GEMMs on or off from the next step (bench A/B; the captured graphs are dropped).
  void set_skinny_gemm(bool on);
  void set_skinny_launch_epilogue(bool on);
  void set_skinny_rope_append(bool on);
  bool skinny_gemm() const { return opt_.skinny_gemm; }
  // skinny_gemm calls made so far (issued or captured into a graph; tests check the path ran).
  int64_t skinny_calls() const { return skinny_calls_; }
  // Of those, the QKV GEMMs with rotary + the K/V append in their epilogue (skinny_rope_append).
  int64_t skinny_rope_calls() const { return skinny_rope_calls_; }
  bool cuda_graphs() const { return opt_.cuda_graphs; }
  int64_t weight_bytes() const { return weight_bytes_; }
  // The device's memory when the pool was sized by gpu_memory_utilization (else zeros).
  const DeviceMemory& memory_at_sizing() const { return memory_at_sizing_; }

 private:
  LlamaCudaModel() = default;
  Status gemm(const __nv_bfloat16* a, const __nv_bfloat16* w, int64_t m, int64_t n, int64_t k, void* c,
              bool fp32_out);
  // Whether a step of m tokens takes c = a · wᵀ (a's rows lda apart) by skinny_gemm.
  bool skinny(int64_t m, int64_t n, int64_t k, int64_t lda, const void* a, const void* w) const;
  // The step's metadata arrays on the device: pointers into meta_dev_ at a StepMetadataLayout's offsets.
  struct StepArrays {
    const int32_t *tokens, *positions, *cu_prefill, *seq_lens, *last_rows, *block_tables;
    const int64_t* slots;
  };
  // Lays the step's metadata out in the pinned meta_host_ and uploads it into meta_dev_ in one copy,
  // the sampler's prepared draw_bytes behind it where they fit (at draws_at_; else -1).
  Status upload_metadata(const ForwardBatch& batch, const AttentionStep& step, const StepMetadataLayout& layout,
                         int64_t draw_bytes);
  Status run_layers(const AttentionStep& step, const StepArrays& arrays);
  // FP8: layer `layer`'s scales from the amax of k_ and v_ over the step's num_tokens rows (on
  // the device), then fixed (KvScales::calibrate). Its layer's first write only, a prefill step,
  // never captured: the host waits for the amax.
  Status calibrate_layer(int32_t layer, int64_t num_tokens);
  // A step begun and not ended, by begin order: step k's in records_[k % 3] (three, so that the
  // step before a step ended keeps its events while the step after it is in flight).
  struct StepRecord {
    cudaEvent_t ev[3] = {};  // begin_step's start, after the upload, after the draws' copy back
    bool timed = false;
    std::vector<int32_t> asks;        // the rows' logprobs asks (-1: none), for end_step
    float* asked_logits = nullptr;    // logprobs on the host: the asking rows' logits, [asking, vocab], pinned
    int64_t asked_capacity = 0;       // floats
  };
  Status copy_asked_logits(StepRecord* rec);
  // end_step's: last_step_device_time's spans from the step's events (and the step before's).
  Status record_device_time(const StepRecord& rec, const StepRecord& before);
  // forward_device's: a graph step's batch padded to graph_batch_size, its tables `width` wide.
  const ForwardBatch& padded_for_graph(const ForwardBatch& b, int64_t width);
  // The largest padded batch: the buffers hold max_batch sequences and max_tokens_per_step tokens.
  int32_t graph_batch_cap() const { return std::min(opt_.max_batch, opt_.max_tokens_per_step); }
  Status plan_step(const ForwardBatch& b, int64_t width, bool graph, AttentionStep* step, int32_t placeholder_rows = 0);
  Status reserve_workspace(int64_t bytes);
  void drop_graphs();  // the captured graphs destroyed (stale: other launches, a moved workspace)

  LlamaConfig config_;
  CudaModelOptions opt_;
  cudaStream_t stream_ = nullptr;
  void* cublas_ = nullptr;  // cublasHandle_t
  KVStorage kv_;
  KvScales kv_scales_;
  DeviceMemory memory_at_sizing_;

  // Weights (bf16), one allocation.
  char* weights_ = nullptr;
  int64_t weight_bytes_ = 0;
  struct Layer {
    const __nv_bfloat16 *in_norm, *wq, *wk, *wv, *wo, *post_norm, *w_gu, *w_down;
  };
  const __nv_bfloat16 *embed_ = nullptr, *final_norm_ = nullptr, *lm_head_ = nullptr;
  std::vector<Layer> layers_;
  bool qkv_fused_ = false;  // every layer's wq, wk, wv adjacent: one [Q + 2·KV, hidden] weight
  int sm_count_ = 0;
  model::cuda::SkinnyWorkspace skinny_ws_;  // in buffers_ (its counters zeroed at create)
  int64_t skinny_calls_ = 0;
  int64_t skinny_rope_calls_ = 0;

  // Activations and step metadata, sized by the options; one allocation.
  char* buffers_ = nullptr;
  float *x_ = nullptr, *last_ = nullptr, *logits_ = nullptr, *inv_freq_ = nullptr;
  float* kv_amax_ = nullptr;  // FP8 calibration: [2, num_kv_heads] (K's, then V's)
  __nv_bfloat16 *h_ = nullptr, *q_ = nullptr, *k_ = nullptr, *v_ = nullptr, *attn_ = nullptr, *tmp_ = nullptr,
                *gu_ = nullptr, *act_ = nullptr, *last_norm_ = nullptr;
  // The step's small metadata arrays (tokens, positions, slots, cu_prefill, seq_lens, last rows,
  // block tables), one StepMetadataLayout, then the step's draws' parameters: on the device sized
  // for the largest step the options allow (and a full batch's draws with 8 banned ids a row), so
  // it never moves (captured graphs read it); in pinned host memory, grown when needed;
  // meta_uploaded_ is recorded on stream_ after each upload out of meta_host_.
  char* meta_dev_ = nullptr;
  int64_t meta_dev_bytes_ = 0;
  char* meta_host_ = nullptr;
  int64_t meta_host_bytes_ = 0;
  cudaEvent_t meta_uploaded_ = nullptr;
  int64_t draws_at_ = -1;  // the last upload's draws' parameters in meta_dev_ (-1: not in it)
  AttentionStepBuilder steps_;
  void* workspace_ = nullptr;  // split-K decode
  int64_t workspace_bytes_ = 0;
  // Pure decode steps, by batch size, with the metadata layout their launches read.
  struct Graph {
    cudaGraphExec_t exec = nullptr;
    StepMetadataLayout layout;
  };
  // By (padded batch, table width, the prompt chunks' cu_prefill: {0} for a pure decode step).
  struct GraphKey {
    int32_t batch;
    int64_t width;
    std::vector<int32_t> cu_prefill;
    bool operator<(const GraphKey& o) const {
      return std::tie(batch, width, cu_prefill) < std::tie(o.batch, o.width, o.cu_prefill);
    }
  };
  std::map<GraphKey, Graph> graphs_;
  size_t mixed_graph_count_ = 0;  // of graphs_, the mixed steps'
  std::set<GraphKey> mixed_seen_;  // mixed shapes run once, eagerly (at most 1024, then cleared)
  ForwardBatch padded_;  // padded_for_graph's buffers, reused step to step
  CudaSampler sampler_;
  int32_t* drawn_ = nullptr;  // [max_batch] the last begun step's draws (placeholders read them)
  int32_t drawn_rows_ = 0;    // its rows (0 after a step that failed to begin)
  StepRecord records_[3];
  int64_t begun_ = 0, ended_ = 0;  // steps
  // The steps' device timing (last_step_device_time): forward_device records the `uploaded`
  // event where timed_upload_ points.
  cudaEvent_t timed_upload_ = nullptr;
  bool upload_untimed_ = false;  // forward_device could not record timed_upload_
  bool prev_step_timed_ = false;  // the step ended last was timed, and its idle after it is the host's
  StepDeviceTime last_device_time_;
  bool last_device_time_valid_ = false;
};

}  // namespace flashserve::model
