// The CUDA model (label gpu): the tiny model in bf16 on the GPU against the fp32 CPU model
// with the same weights, through the same steps (chunked prefill, split-K decode, a mixed
// batch): logits within bf16's tolerance, greedy tokens equal wherever the CPU's top two
// logits are further apart than that tolerance. And the engine driving the GPU model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "kvcache/kv_cache_manager.h"
#include "server/engine/engine.h"
#include "server/model/cuda/llama_cuda.h"
#include "server/model/llama.h"
#include "tests/cuda_support.h"

namespace flashserve::model {
namespace {

// The step for the sequence's next n tokens of all (its tokens so far).
ForwardBatch step(KVCacheManager& mgr, int64_t id, const std::vector<int32_t>& all, int32_t n, bool decode) {
  ForwardBatch b;
  b.num_decode = decode ? 1 : 0;
  b.cu_seqlens_q = {0, n};
  const int32_t done = mgr.num_slotted_tokens(id);
  b.tokens.assign(all.begin() + done, all.begin() + done + n);
  std::vector<BlockCopy> copies;
  EXPECT_TRUE(mgr.allocate_slots(id, all, n, &b.slot_mapping, &copies).ok());
  b.seq_lens = {mgr.num_slotted_tokens(id)};
  b.block_table_stride = mgr.config().max_blocks_per_seq;
  b.block_tables.assign(static_cast<size_t>(b.block_table_stride), 0);
  std::copy(mgr.block_table(id)->begin(), mgr.block_table(id)->end(), b.block_tables.begin());
  return b;
}

// The tiny preset with head_dim 64 (the CUDA kernels take 64 and 128).
LlamaConfig tiny_gpu() {
  LlamaConfig c;
  EXPECT_TRUE(synthetic_preset("tiny", &c).ok());
  c.head_dim = 64;
  return c;
}

TEST(LlamaCuda, MatchesCpuModelWithinBf16) {
  FS_SKIP_WITHOUT_CUDA();
  const LlamaConfig c = tiny_gpu();
  LlamaWeights w;
  ASSERT_TRUE(synthetic_weights(c, 21, &w).ok());
  // The CPU model gets the weights rounded to bf16, as the GPU holds them.
  LlamaWeights wb = w;
  auto round_all = [](std::vector<float>& v) {
    for (float& x : v) x = round_to(DType::kBFloat16, x);
  };
  round_all(wb.embed);
  round_all(wb.final_norm);
  round_all(wb.lm_head);
  for (auto& l : wb.layers)
    for (auto* v : {&l.input_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.post_norm, &l.w_gate, &l.w_up, &l.w_down}) round_all(*v);
  LlamaModel cpu;
  ASSERT_TRUE(LlamaModel::create(c, wb, 64, 16, &cpu).ok());
  CudaModelOptions opt;
  opt.num_blocks = 64;
  opt.block_size = 16;
  opt.max_tokens_per_step = 512;
  opt.max_batch = 8;
  opt.max_blocks_per_seq = 32;
  std::unique_ptr<LlamaCudaModel> gpu, eager;
  const Status st = LlamaCudaModel::create(c, &w, 0, opt, &gpu);
  ASSERT_TRUE(st.ok()) << st.to_string();
  opt.cuda_graphs = false;  // the same model without graph replay, for a cross-check
  ASSERT_TRUE(LlamaCudaModel::create(c, &w, 0, opt, &eager).ok());

  KVCacheConfig kc;
  kc.num_blocks = 64;
  kc.block_size = 16;
  kc.max_blocks_per_seq = 32;
  KVCacheManager mgr(kc);
  std::mt19937 rng(8);
  std::vector<int32_t> prompt(77);
  for (auto& t : prompt) t = std::uniform_int_distribution<int>(3, c.vocab_size - 1)(rng);
  int32_t cached;
  ASSERT_TRUE(mgr.add_sequence(1, prompt.data(), 77, 0, &cached).ok());
  std::vector<float> lc, lg;
  double worst = 0, scale = 0;
  int compared = 0;
  std::vector<int32_t> seq = prompt;  // then each next token
  for (int s = 0; s < 12; ++s) {
    ForwardBatch b = s < 2 ? step(mgr, 1, seq, std::min(77, (s + 1) * 40) - s * 40, false) : step(mgr, 1, seq, 1, true);
    ASSERT_TRUE(cpu.forward(b, &lc).ok());
    const Status g = gpu->forward(b, &lg);
    ASSERT_TRUE(g.ok()) << g.to_string();
    std::vector<float> le;
    ASSERT_TRUE(eager->forward(b, &le).ok());
    for (size_t i = 0; i < le.size(); ++i)
      ASSERT_NEAR(lg[i], le[i], 2e-2 * (1 + std::fabs(le[i]))) << "graph replay vs eager, step " << s;
    if (s == 0) continue;  // logits of a mid-prompt chunk are not used
    double mx = 0;
    for (size_t i = 0; i < lc.size(); ++i) {
      ASSERT_TRUE(std::isfinite(lg[i]));
      worst = std::max(worst, static_cast<double>(std::fabs(lg[i] - lc[i])));
      mx = std::max(mx, static_cast<double>(std::fabs(lc[i])));
    }
    scale = std::max(scale, mx);
    std::vector<float> sorted = lc;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const int cpu_tok = static_cast<int>(std::max_element(lc.begin(), lc.end()) - lc.begin());
    const int gpu_tok = static_cast<int>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    if (sorted[0] - sorted[1] > 0.1 * mx) {
      EXPECT_EQ(gpu_tok, cpu_tok) << "step " << s;
      ++compared;
    }
    seq.push_back(cpu_tok);
  }
  EXPECT_LT(worst, 0.05 * scale) << "GPU logits differ from the CPU's by " << worst << " (max |logit| " << scale << ")";
  EXPECT_GT(compared, 3);
  EXPECT_TRUE(gpu->cuda_graphs()) << "decode steps fell back from graph replay";
}

TEST(LlamaCuda, EngineOnTheGpuModel) {
  FS_SKIP_WITHOUT_CUDA();
  const LlamaConfig c = tiny_gpu();
  LlamaWeights w;
  ASSERT_TRUE(synthetic_weights(c, 21, &w).ok());
  CudaModelOptions opt;
  opt.num_blocks = 128;
  opt.block_size = 16;
  opt.max_tokens_per_step = 256;
  opt.max_batch = 64;
  std::unique_ptr<LlamaCudaModel> gpu;
  ASSERT_TRUE(LlamaCudaModel::create(c, &w, 0, opt, &gpu).ok());
  LlamaConfig c32;  // head_dim 32: a clear UNSUPPORTED from the first step, not a crash
  ASSERT_TRUE(synthetic_preset("tiny", &c32).ok());
  LlamaWeights w32;
  ASSERT_TRUE(synthetic_weights(c32, 1, &w32).ok());
  std::unique_ptr<LlamaCudaModel> bad;
  ASSERT_TRUE(LlamaCudaModel::create(c32, &w32, 0, opt, &bad).ok());
  ForwardBatch fb;
  fb.tokens = {1, 2};
  fb.cu_seqlens_q = {0, 2};
  fb.seq_lens = {2};
  fb.block_table_stride = 1;
  fb.block_tables = {1};
  fb.slot_mapping = {16, 17};
  std::vector<float> logits;
  EXPECT_EQ(bad->forward(fb, &logits).code(), StatusCode::kUnsupported);
  engine::EngineConfig ec;
  ec.num_blocks = 128;
  ec.block_size = 16;
  ec.max_num_batched_tokens = 256;
  std::unique_ptr<engine::Engine> e;
  ASSERT_TRUE(engine::Engine::create(ec, std::move(gpu), &e).ok());
  std::vector<std::shared_ptr<engine::ResultStream>> streams;
  for (int i = 0; i < 8; ++i) {
    engine::GenerateRequest r;
    r.request_id = "g" + std::to_string(i);
    r.prompt = std::vector<int32_t>(20 + 13 * i, 5 + i);
    r.sampling.temperature = 0.f;
    r.sampling.max_tokens = 16;
    r.sampling.ignore_eos = true;
    std::shared_ptr<engine::ResultStream> s;
    ASSERT_TRUE(e->enqueue(r, &s).ok());
    streams.push_back(s);
  }
  for (auto& s : streams) {
    engine::StreamEvent ev;
    int n = 0;
    engine::FinishReason reason = engine::FinishReason::kNone;
    while (s->next(&ev)) {
      n += static_cast<int>(ev.tokens.size());
      if (ev.finished) reason = ev.reason;
    }
    EXPECT_EQ(n, 16);
    EXPECT_EQ(reason, engine::FinishReason::kLength);
  }
  EXPECT_NEAR(e->stats().kv_usage, 0.0, 1e-12);
}

}  // namespace
}  // namespace flashserve::model
