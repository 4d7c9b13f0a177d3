// The real embedded default, SmolLM2-135M-Instruct.Q4_1.gguf, from the model cache
// (scripts/fetch_model.sh puts it there; FLASHSERVE_MODEL_DIR or ~/.cache/flashserve/models):
// its config, the tokenizer keys another component reads, a forward pass, and greedy decoding
// through the serving path (paged prefill, split-K decode) token for token against Hugging Face
// transformers' fp32 greedy on the same file (tests/data/smollm2_greedy.json, made by
// tools/gguf_reference.py). Skipped, with a message, when the file is not in the cache.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "server/model/gguf.h"
#include "server/model/gguf_weights.h"
#include "server/model/llama.h"

namespace flashserve::model {
namespace {

constexpr const char* kModelFile = "SmolLM2-135M-Instruct.Q4_1.gguf";

std::string model_path() {
  const char* dir = std::getenv("FLASHSERVE_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::string d = dir ? dir : std::string(home ? home : "") + "/.cache/flashserve/models";
  return d + "/" + kModelFile;
}

#define SKIP_WITHOUT_MODEL()                                                                              \
  if (!std::filesystem::exists(model_path()))                                                             \
  GTEST_SKIP() << model_path() << " is not in the model cache (bash scripts/fetch_model.sh fetches it)"

// The model loaded once for every test of this file.
struct Loaded {
  LlamaConfig config;
  LlamaWeights weights;
  Status status;
};
const Loaded& loaded() {
  static const Loaded* l = [] {
    auto* x = new Loaded;
    x->status = load_gguf_model(model_path(), &x->config, &x->weights);
    return x;
  }();
  return *l;
}

TEST(GgufSmolLM2, ConfigAndTokenizerKeys) {
  SKIP_WITHOUT_MODEL();
  GgufFile f;
  ASSERT_TRUE(GgufFile::open(model_path(), &f).ok());
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.tensors().size(), 272u);
  LlamaConfig c;
  const Status st = gguf_llama_config(f, &c);
  ASSERT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(c.num_hidden_layers, 30);
  EXPECT_EQ(c.hidden_size, 576);
  EXPECT_EQ(c.intermediate_size, 1536);
  EXPECT_EQ(c.num_attention_heads, 9);
  EXPECT_EQ(c.num_key_value_heads, 3);
  EXPECT_EQ(c.head_dim, 64);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.rope_theta, 100000.0);
  EXPECT_EQ(c.rms_norm_eps, static_cast<double>(1e-5f));
  EXPECT_EQ(c.max_position_embeddings, 8192);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(f.tensor("token_embd.weight")->type, GgmlType::kQ8_0);
  EXPECT_EQ(f.tensor("blk.0.attn_q.weight")->type, GgmlType::kQ4_1);

  std::vector<std::string_view> tokens, merges;
  ASSERT_TRUE(f.get_string_array_views("tokenizer.ggml.tokens", &tokens).ok());
  ASSERT_TRUE(f.get_string_array_views("tokenizer.ggml.merges", &merges).ok());
  EXPECT_EQ(tokens.size(), 49152u);
  EXPECT_EQ(merges.size(), 48900u);
  EXPECT_EQ(tokens[1], "<|im_start|>");
  EXPECT_EQ(tokens[2], "<|im_end|>");
  std::vector<int32_t> types;
  ASSERT_TRUE(f.get_i32_array("tokenizer.ggml.token_type", &types).ok());
  EXPECT_EQ(types.size(), 49152u);
  std::string pre, model, tmpl;
  ASSERT_TRUE(f.get_string("tokenizer.ggml.pre", &pre).ok());
  ASSERT_TRUE(f.get_string("tokenizer.ggml.model", &model).ok());
  ASSERT_TRUE(f.get_string("tokenizer.chat_template", &tmpl).ok());
  EXPECT_EQ(pre, "smollm");
  EXPECT_EQ(model, "gpt2");
  EXPECT_NE(tmpl.find("<|im_start|>"), std::string::npos);
  uint32_t bos, eos, pad;
  ASSERT_TRUE(f.get_u32("tokenizer.ggml.bos_token_id", &bos).ok());
  ASSERT_TRUE(f.get_u32("tokenizer.ggml.eos_token_id", &eos).ok());
  ASSERT_TRUE(f.get_u32("tokenizer.ggml.padding_token_id", &pad).ok());
  EXPECT_EQ(bos, 1u);
  EXPECT_EQ(eos, 2u);
  EXPECT_EQ(pad, 2u);
}

// One sequence through the serving path: the prompt as one paged-prefill chunk, then one token
// a step through split-K decode; greedy. margins[i]: top-1 minus top-2 logit at step i;
// first_logits: the logits after the prompt.
Status greedy(LlamaModel& m, const std::vector<int32_t>& prompt, int n, std::vector<int32_t>* out,
              std::vector<float>* margins, std::vector<float>* first_logits) {
  const int32_t bs = m.kv_shape().block_size, V = m.config().vocab_size;
  const int64_t stride = m.kv_shape().num_blocks - 1;
  std::vector<int32_t> table(static_cast<size_t>(stride));
  for (int64_t i = 0; i < stride; ++i) table[i] = static_cast<int32_t>(i + 1);  // block 0 stays null
  out->clear();
  margins->clear();
  std::vector<int32_t> step_tokens = prompt;
  int32_t len = 0;
  for (int step = 0; step < n; ++step) {
    ForwardBatch b;
    b.num_decode = step == 0 ? 0 : 1;
    b.tokens = step_tokens;
    b.cu_seqlens_q = {0, static_cast<int32_t>(step_tokens.size())};
    len += static_cast<int32_t>(step_tokens.size());
    b.seq_lens = {len};
    b.block_tables = table;
    b.block_table_stride = stride;
    for (int32_t p = len - static_cast<int32_t>(step_tokens.size()); p < len; ++p)
      b.slot_mapping.push_back(int64_t{table[p / bs]} * bs + p % bs);
    std::vector<float> logits;
    FS_RETURN_IF_ERROR(m.forward(b, &logits));
    if (step == 0) *first_logits = logits;
    const int32_t best = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    float second = -INFINITY;
    for (int32_t i = 0; i < V; ++i)
      if (i != best) second = std::max(second, logits[i]);
    for (float x : logits)
      if (!std::isfinite(x)) return internal_error("a logit is not finite at step " + std::to_string(step));
    out->push_back(best);
    margins->push_back(logits[best] - second);
    step_tokens = {best};
  }
  return Status::Ok();
}

TEST(GgufSmolLM2, ForwardGivesFiniteLogits) {
  SKIP_WITHOUT_MODEL();
  const Loaded& l = loaded();
  ASSERT_TRUE(l.status.ok()) << l.status.to_string();
  LlamaModel m;
  ASSERT_TRUE(LlamaModel::create(l.config, l.weights, 64, 16, &m).ok());
  std::vector<float> logits;
  ASSERT_TRUE(m.reference_forward({1, 4093, 198, 1780, 314, 260}, &logits).ok());
  ASSERT_EQ(logits.size(), 6u * 49152);
  double sum_sq = 0;
  for (float x : logits) {
    ASSERT_TRUE(std::isfinite(x));
    sum_sq += static_cast<double>(x) * x;
  }
  EXPECT_GT(sum_sq, 0);
}

TEST(GgufSmolLM2, GreedyMatchesTransformers) {
  SKIP_WITHOUT_MODEL();
  std::ifstream in(std::string(FLASHSERVE_TEST_DATA_DIR) + "/smollm2_greedy.json");
  ASSERT_TRUE(in) << "tests/data/smollm2_greedy.json is missing";
  const nlohmann::json doc = nlohmann::json::parse(in);
  const Loaded& l = loaded();
  ASSERT_TRUE(l.status.ok()) << l.status.to_string();
  LlamaModel m;
  ASSERT_TRUE(LlamaModel::create(l.config, l.weights, 64, 16, &m).ok());
  int equal = 0, total = 0;
  double worst_logit_diff = 0;
  for (const auto& c : doc["cases"]) {
    const auto prompt = c["prompt_ids"].get<std::vector<int32_t>>();
    const auto expected = c["expected"].get<std::vector<int32_t>>();
    const auto ref_margin = c["top2_margin"].get<std::vector<double>>();
    std::vector<int32_t> got;
    std::vector<float> margins, first;
    const Status st = greedy(m, prompt, static_cast<int>(expected.size()), &got, &margins, &first);
    ASSERT_TRUE(st.ok()) << st.to_string();
    // The logits themselves after the prompt, at transformers' 8 largest.
    double max_diff = 0;
    for (const auto& iv : c["first_step_top_logits"]) {
      const int32_t id = iv[0].get<int32_t>();
      max_diff = std::max(max_diff, std::fabs(first[id] - iv[1].get<double>()));
    }
    worst_logit_diff = std::max(worst_logit_diff, max_diff);
    EXPECT_LT(max_diff, 2e-4) << c["name"] << ": logits after the prompt differ from transformers' by " << max_diff;
    size_t same = 0;
    while (same < got.size() && got[same] == expected[same]) ++same;
    equal += static_cast<int>(same);
    total += static_cast<int>(expected.size());
    const float min_margin = *std::min_element(margins.begin(), margins.end());
    std::printf("%s: %zu prompt tokens, %zu/%zu greedy tokens equal to transformers' (our smallest top-2 margin %.4g)\n",
                c["name"].get<std::string>().c_str(), prompt.size(), same, expected.size(), min_margin);
    EXPECT_EQ(got, expected) << c["name"] << ": first difference at step " << same << " (transformers' top-2 margin "
                             << (same < ref_margin.size() ? ref_margin[same] : 0) << ", ours "
                             << (same < margins.size() ? margins[same] : 0) << ")";
  }
  std::printf("greedy tokens equal: %d/%d; largest difference of a top logit after a prompt: %.3g\n", equal, total,
              worst_logit_diff);
}

}  // namespace
}  // namespace flashserve::model
