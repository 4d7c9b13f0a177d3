// A GGUF model on the GPU (label gpu): the weights load_gguf_model gives (the SmolLM2 file from
// the model cache, or FLASHSERVE_GGUF_TEST_FILE) run in the CUDA model in bf16 against the fp32
// CPU model holding the same weights rounded to bf16: a prompt as one paged-prefill chunk, then
// greedy decode steps; logits within bf16's tolerance, tokens equal wherever the CPU's top two
// logits are further apart than that. Skipped, with a message, without a GPU or the file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "common/dtype.h"
#include "server/model/cuda/llama_cuda.h"
#include "server/model/gguf_weights.h"
#include "server/model/llama.h"
#include "tests/cuda_support.h"

namespace flashserve::model {
namespace {

std::string gguf_path() {
  if (const char* f = std::getenv("FLASHSERVE_GGUF_TEST_FILE")) return f;
  const char* dir = std::getenv("FLASHSERVE_MODEL_DIR");
  const char* home = std::getenv("HOME");
  return (dir ? std::string(dir) : std::string(home ? home : "") + "/.cache/flashserve/models") +
         "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

ForwardBatch one_sequence_step(const std::vector<int32_t>& toks, int32_t len_before, int32_t block_size,
                               int64_t stride, bool decode) {
  ForwardBatch b;
  b.num_decode = decode ? 1 : 0;
  b.tokens = toks;
  b.cu_seqlens_q = {0, static_cast<int32_t>(toks.size())};
  const int32_t len = len_before + static_cast<int32_t>(toks.size());
  b.seq_lens = {len};
  b.block_table_stride = stride;
  for (int64_t i = 0; i < stride; ++i) b.block_tables.push_back(static_cast<int32_t>(i + 1));  // block 0: null
  for (int32_t p = len_before; p < len; ++p) b.slot_mapping.push_back(int64_t{1 + p / block_size} * block_size + p % block_size);
  return b;
}

TEST(GgufCuda, GgufModelOnTheGpuMatchesCpuWithinBf16) {
  FS_SKIP_WITHOUT_CUDA();
  const std::string path = gguf_path();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (bash scripts/fetch_model.sh fetches it)";
  LlamaConfig c;
  LlamaWeights w;
  const Status st = load_gguf_model(path, &c, &w);
  ASSERT_TRUE(st.ok()) << st.to_string();
  std::printf("%s: %d layers, hidden %d, heads %d/%d, head_dim %d, vocab %d, tied %d\n", path.c_str(),
              c.num_hidden_layers, c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
              c.vocab_size, c.tie_word_embeddings ? 1 : 0);
  LlamaWeights wb = w;  // the CPU model gets the weights as the GPU holds them
  auto round_all = [](std::vector<float>& v) {
    for (float& x : v) x = bf16_to_float(float_to_bf16(x));
  };
  round_all(wb.embed);
  round_all(wb.final_norm);
  round_all(wb.lm_head);
  for (auto& l : wb.layers)
    for (auto* v : {&l.input_norm, &l.wq, &l.wk, &l.wv, &l.wo, &l.post_norm, &l.w_gate, &l.w_up, &l.w_down}) round_all(*v);
  constexpr int32_t kBlocks = 64, kBlockSize = 16;
  LlamaModel cpu;
  ASSERT_TRUE(LlamaModel::create(c, std::move(wb), kBlocks, kBlockSize, &cpu).ok());
  CudaModelOptions opt;
  opt.num_blocks = kBlocks;
  opt.block_size = kBlockSize;
  opt.max_tokens_per_step = 256;
  opt.max_batch = 4;
  opt.max_blocks_per_seq = kBlocks - 1;
  std::unique_ptr<LlamaCudaModel> gpu;
  const Status g = LlamaCudaModel::create(c, &w, 0, opt, &gpu);
  ASSERT_TRUE(g.ok()) << g.to_string();

  // "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n<|im_start|>assistant\n" in SmolLM2's ids.
  std::vector<int32_t> toks = {1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198};
  for (int32_t& t : toks) t %= c.vocab_size;
  int32_t len = 0;
  double worst = 0, scale = 0;
  int compared = 0;
  std::vector<int32_t> cpu_tokens;
  for (int s = 0; s < 16; ++s) {
    const ForwardBatch b = one_sequence_step(toks, len, kBlockSize, kBlocks - 1, s > 0);
    len += static_cast<int32_t>(toks.size());
    std::vector<float> lc, lg;
    ASSERT_TRUE(cpu.forward(b, &lc).ok());
    const Status gs = gpu->forward(b, &lg);
    ASSERT_TRUE(gs.ok()) << gs.to_string();
    double mx = 0;
    for (size_t i = 0; i < lc.size(); ++i) {
      ASSERT_TRUE(std::isfinite(lg[i])) << "step " << s << " logit " << i;
      worst = std::max(worst, static_cast<double>(std::fabs(lg[i] - lc[i])));
      mx = std::max(mx, static_cast<double>(std::fabs(lc[i])));
    }
    scale = std::max(scale, mx);
    std::vector<float> sorted = lc;
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    const int32_t cpu_tok = static_cast<int32_t>(std::max_element(lc.begin(), lc.end()) - lc.begin());
    const int32_t gpu_tok = static_cast<int32_t>(std::max_element(lg.begin(), lg.end()) - lg.begin());
    if (sorted[0] - sorted[1] > 0.05 * mx) {
      EXPECT_EQ(gpu_tok, cpu_tok) << "step " << s << " (CPU top-2 margin " << sorted[0] - sorted[1] << ")";
      ++compared;
    }
    cpu_tokens.push_back(cpu_tok);
    toks = {cpu_tok};
  }
  std::printf("GPU vs CPU: largest logit difference %.3g (max |logit| %.3g), %d of 16 steps had a clear top token\n",
              worst, scale, compared);
  EXPECT_LT(worst, 0.05 * scale) << "GPU logits differ from the CPU's by " << worst;
  EXPECT_GT(compared, 3);
}

}  // namespace
}  // namespace flashserve::model
