// The model: the safetensors reader (round trip; truncated and lying files are errors), the
// config parser (llama3 rope scaling), and the Llama forward through the paged cache and the
// attention backend (chunked prefill, split-K decode, a shared prefix, mixed batches) against
// the plain reference forward with no cache: logits close, greedy tokens identical.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "kvcache/kv_cache_manager.h"
#include "server/model/llama.h"
#include "server/model/safetensors.h"

namespace flashserve::model {
namespace {

std::string temp_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("flashserve_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(Safetensors, RoundTripAndRejectsBadFiles) {
  const std::string dir = temp_dir("st");
  std::vector<float> a = {1.f, -2.5f, 3.25f, 0.f, 7.f, -1e-3f}, b = {0.5f, 1.5f};
  ASSERT_TRUE(write_safetensors(dir + "/x.safetensors", {{"a", {2, 3}, a.data(), DType::kBFloat16},
                                                          {"b", {2}, b.data(), DType::kFloat32}})
                  .ok());
  SafetensorsFile f;
  ASSERT_TRUE(SafetensorsFile::open(dir + "/x.safetensors", &f).ok());
  std::vector<float> got;
  ASSERT_TRUE(f.read_f32("a", {2, 3}, &got).ok());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(got[i], round_to(DType::kBFloat16, a[i]));
  ASSERT_TRUE(f.read_f32("b", {2}, &got).ok());
  EXPECT_EQ(got, b);
  EXPECT_EQ(f.read_f32("b", {3}, &got).code(), StatusCode::kInvalidArgument);  // wrong shape
  EXPECT_EQ(f.read_f32("c", {2}, &got).code(), StatusCode::kInvalidArgument);  // no such tensor

  std::ifstream in(dir + "/x.safetensors", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  SafetensorsFile g;
  // Truncated anywhere: an error, never a crash.
  for (size_t cut : {size_t{0}, size_t{5}, size_t{12}, bytes.size() - 1}) {
    std::vector<char> t(bytes.begin(), bytes.begin() + static_cast<long>(cut));
    EXPECT_FALSE(SafetensorsFile::parse(t, "truncated", &g).ok()) << "cut at " << cut;
  }
  auto with_header = [](const std::string& h, size_t data) {
    std::vector<char> v(8 + h.size() + data, 0);
    for (int i = 0; i < 8; ++i) v[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
    std::copy(h.begin(), h.end(), v.begin() + 8);
    return v;
  };
  const char* lies[] = {
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",    // past the data
      R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})",     // size vs shape
      R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})",     // dtype
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
      R"({"a":[1,2,3]})", R"(not json)", R"([1,2])"};
  for (const char* h : lies) {
    const Status st = SafetensorsFile::parse(with_header(h, 12), "lie", &g);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << h;
  }
  std::vector<char> huge = with_header("{}", 0);
  huge[7] = 0x7f;  // header length far past the file
  EXPECT_FALSE(SafetensorsFile::parse(huge, "huge", &g).ok());
  std::filesystem::remove_all(dir);
}

TEST(LlamaConfig, ParsesHuggingFaceConfigWithLlama3Rope) {
  LlamaConfig c;
  ASSERT_TRUE(parse_llama_config(R"({"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "rms_norm_eps": 1e-6,
      "rope_theta": 500000.0, "max_position_embeddings": 1024, "tie_word_embeddings": true,
      "eos_token_id": [7, 9],
      "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                       "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})",
                                 &c)
                  .ok());
  EXPECT_EQ(c.head_dim, 16);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{7, 9}));
  const auto f = c.inv_freq();
  // Short wavelengths kept, long ones divided by the factor (Llama 3.1's rule).
  EXPECT_DOUBLE_EQ(f[0], 1.0);
  const double last = 1.0 / std::pow(500000.0, 14.0 / 16);  // wavelength 2π/last > 8192: scaled
  EXPECT_NEAR(f[7], last / 8.0, 1e-15);
  EXPECT_FALSE(parse_llama_config(R"({"vocab_size": 100})", &c).ok());
  EXPECT_FALSE(parse_llama_config(R"({"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 3})", &c).ok());
  EXPECT_EQ(synthetic_preset("nope", &c).code(), StatusCode::kInvalidArgument);
}

// A config.json as transformers >= 5 writes it: the rotary settings under rope_parameters,
// no top-level rope_theta or rope_scaling. It must give what the older keys give.
TEST(LlamaConfig, ReadsRopeParametersAsTransformers5WritesThem) {
  const std::string base = R"("vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "model_type": "llama",
      "hidden_act": "silu", "attention_bias": false, "mlp_bias": false, )";
  LlamaConfig v5, v4;
  ASSERT_TRUE(parse_llama_config("{" + base + R"("rope_parameters": {"rope_type": "llama3", "rope_theta": 500000.0,
      "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})", &v5).ok());
  ASSERT_TRUE(parse_llama_config("{" + base + R"("rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3",
      "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}})", &v4).ok());
  EXPECT_EQ(v5.rope_theta, 500000.0);
  EXPECT_TRUE(v5.rope_scaling.llama3);
  EXPECT_EQ(v5.rope_scaling.factor, 32.0);
  EXPECT_EQ(v5.inv_freq(), v4.inv_freq());
  // SmolLM2's: default rope at theta 1e5, written only under rope_parameters.
  LlamaConfig smol;
  ASSERT_TRUE(parse_llama_config("{" + base + R"("rope_parameters": {"rope_type": "default", "rope_theta": 100000.0}})", &smol).ok());
  EXPECT_EQ(smol.rope_theta, 100000.0);
  EXPECT_FALSE(smol.rope_scaling.llama3);
  EXPECT_DOUBLE_EQ(smol.inv_freq()[1], 1.0 / std::pow(100000.0, 2.0 / 16));
  // Linear: every frequency divided by the factor.
  LlamaConfig lin;
  ASSERT_TRUE(parse_llama_config("{" + base + R"("rope_parameters": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}})", &lin).ok());
  EXPECT_DOUBLE_EQ(lin.inv_freq()[3], 1.0 / std::pow(10000.0, 6.0 / 16) / 4.0);
}

// What the forward does not compute is refused at load, naming the key; never computed another way.
TEST(LlamaConfig, RefusesWhatIsNotImplemented) {
  const std::string base = R"({"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, )";
  const std::pair<const char*, const char*> cases[] = {
      {R"("attention_bias": true})", "attention_bias"},
      {R"("mlp_bias": true})", "mlp_bias"},
      {R"("hidden_act": "gelu"})", "hidden_act"},
      {R"("rope_parameters": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}})", "yarn"},
      {R"("rope_scaling": {"rope_type": "dynamic", "factor": 2.0}})", "dynamic"},
      {R"("model_type": "qwen2"})", "qwen2"},
      {R"("model_type": "mistral", "sliding_window": 4096})", "sliding_window"},
  };
  for (const auto& [tail, name] : cases) {
    LlamaConfig c;
    const Status st = parse_llama_config(base + tail, &c);
    EXPECT_EQ(st.code(), StatusCode::kUnsupported) << tail << ": " << st.to_string();
    EXPECT_NE(st.message().find(name), std::string::npos) << st.to_string();
  }
  LlamaConfig c;
  EXPECT_TRUE(parse_llama_config(base + R"("model_type": "mistral", "sliding_window": null})", &c).ok());
  EXPECT_EQ(parse_llama_config(base + R"("rope_parameters": {"rope_type": "linear", "factor": -1}})", &c).code(),
            StatusCode::kInvalidArgument);
}

// Found by fuzz_config: a rope type that is not a string threw (nlohmann's value() with a string
// default), and integers past 32 bits were truncated (4294967303 read as 7), in both files.
TEST(LlamaConfig, WrongTypesAndWideIntegersAreErrors) {
  const std::string base = R"({"vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, )";
  LlamaConfig c;
  for (const char* tail : {R"("rope_parameters": {"rope_type": 92}})", R"("rope_scaling": {"type": [1]}})",
                           R"("rope_scaling": {"rope_type": {"a": 1}, "factor": 2.0}})"}) {
    Status st;
    EXPECT_NO_THROW(st = parse_llama_config(base + tail, &c)) << tail;
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << tail << ": " << st.to_string();
  }
  EXPECT_EQ(parse_llama_config(R"({"vocab_size": 4294967396, "hidden_size": 64, "intermediate_size": 96,
      "num_hidden_layers": 2, "num_attention_heads": 4})", &c).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(parse_llama_config(base + R"("head_dim": -4294967280})", &c).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(parse_llama_config(base + R"("eos_token_id": [4294967303, 9]})", &c).ok());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{9}));  // the wide id is not taken as 7
  EXPECT_EQ(apply_generation_config(R"({"eos_token_id": 4294967303})", &c).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(apply_generation_config(R"({"eos_token_id": [3, 18446744073709551615]})", &c).code(),
            StatusCode::kOutOfRange);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{9}));
}

TEST(LlamaConfig, GenerationConfigEosIds) {
  LlamaConfig c;
  ASSERT_TRUE(synthetic_preset("tiny", &c).ok());
  ASSERT_TRUE(apply_generation_config(R"({"eos_token_id": 7})", &c).ok());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{7}));
  ASSERT_TRUE(apply_generation_config(R"({"eos_token_id": [3, 4], "do_sample": true})", &c).ok());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{3, 4}));
  ASSERT_TRUE(apply_generation_config(R"({"temperature": 0.7})", &c).ok());  // no eos: unchanged
  EXPECT_EQ(c.eos_token_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(apply_generation_config(R"({"eos_token_id": [3, "x"]})", &c).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(apply_generation_config(R"({"eos_token_id": 100000})", &c).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(apply_generation_config("not json", &c).code(), StatusCode::kInvalidArgument);
}

// The tiny preset as a Hugging Face config.json.
constexpr const char* kTinyConfigJson = R"({"vocab_size": 512, "hidden_size": 128, "intermediate_size": 344,
      "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
      "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 4096, "eos_token_id": 2})";

// The tiny model, written to a folder (bf16 weights in two shards) and loaded back.
LlamaModel load_tiny(int num_blocks, int block_size) {
  LlamaConfig c;
  EXPECT_TRUE(synthetic_preset("tiny", &c).ok());
  LlamaWeights w;
  EXPECT_TRUE(synthetic_weights(c, 42, &w).ok());
  const std::string dir = temp_dir("model");
  auto tensors = weights_as_tensors(c, w, DType::kBFloat16);
  const size_t half = tensors.size() / 2;
  EXPECT_TRUE(write_safetensors(dir + "/model-00001-of-00002.safetensors",
                                std::vector<TensorToWrite>(tensors.begin(), tensors.begin() + half)).ok());
  EXPECT_TRUE(write_safetensors(dir + "/model-00002-of-00002.safetensors",
                                std::vector<TensorToWrite>(tensors.begin() + half, tensors.end())).ok());
  std::ofstream(dir + "/config.json") << kTinyConfigJson;
  // transformers' generate takes its eos ids from generation_config.json over config.json's.
  std::ofstream(dir + "/generation_config.json") << R"({"bos_token_id": 1, "eos_token_id": [2, 5]})";
  LlamaConfig lc;
  LlamaWeights lw;
  const Status st = load_model_folder(dir, &lc, &lw);
  EXPECT_TRUE(st.ok()) << st.to_string();
  EXPECT_EQ(lc.eos_token_ids, (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(lw.layers[1].w_down[5], round_to(DType::kBFloat16, w.layers[1].w_down[5]));
  std::filesystem::remove_all(dir);
  LlamaModel m;
  EXPECT_TRUE(LlamaModel::create(lc, std::move(lw), num_blocks, block_size, &m).ok());
  return m;
}

int argmax(const float* x, int n) { return static_cast<int>(std::max_element(x, x + n) - x); }

// The cache the cached-path tests run on: 64 blocks of 4 tokens, 32 a sequence.
KVCacheConfig small_cache() {
  KVCacheConfig kc;
  kc.num_blocks = 64;
  kc.block_size = 4;
  kc.max_blocks_per_seq = 32;
  return kc;
}

// One sequence's part of a step: its tokens so far (the caller's; the cache manager keeps none),
// of which the n after those with slots are new.
struct Part {
  int64_t id;
  const std::vector<int32_t>* tokens;
  int32_t n;
};

// Builds the batch for the parts through the cache manager.
ForwardBatch make_batch(KVCacheManager& mgr, const std::vector<Part>& parts, int32_t num_decode) {
  ForwardBatch b;
  b.num_decode = num_decode;
  b.cu_seqlens_q = {0};
  const int64_t stride = mgr.config().max_blocks_per_seq;
  b.block_table_stride = stride;
  for (const auto& [id, tokens, n] : parts) {
    const int32_t done = mgr.num_slotted_tokens(id);
    std::vector<BlockCopy> copies;
    const Status st = mgr.allocate_slots(id, *tokens, n, &b.slot_mapping, &copies);
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(copies.empty());
    b.tokens.insert(b.tokens.end(), tokens->begin() + done, tokens->begin() + done + n);
    b.cu_seqlens_q.push_back(static_cast<int32_t>(b.tokens.size()));
    b.seq_lens.push_back(mgr.num_slotted_tokens(id));
    std::vector<int32_t> row(static_cast<size_t>(stride), 0);
    std::copy(mgr.block_table(id)->begin(), mgr.block_table(id)->end(), row.begin());
    b.block_tables.insert(b.block_tables.end(), row.begin(), row.end());
  }
  return b;
}

TEST(LlamaModel, CachedForwardEqualsReferenceGreedy) {
  LlamaModel m = load_tiny(64, 4);
  const int V = m.config().vocab_size;
  KVCacheManager mgr(small_cache());
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(13);
  for (auto& t : prompt) t = std::uniform_int_distribution<int>(3, V - 1)(rng);
  int32_t cached;
  ASSERT_TRUE(mgr.add_sequence(1, prompt.data(), 13, 0, &cached).ok());
  // Chunked prefill: 5 + 5 + 3 tokens, logits from the last chunk.
  std::vector<float> logits;
  for (int start = 0; start < 13; start += 5) {
    ForwardBatch b = make_batch(mgr, {{1, &prompt, std::min(13, start + 5) - start}}, 0);
    ASSERT_TRUE(m.forward(b, &logits).ok());
  }
  std::vector<int32_t> seq = prompt;
  double max_err = 0;
  for (int step = 0; step < 10; ++step) {
    std::vector<float> ref;
    ASSERT_TRUE(m.reference_forward(seq, &ref).ok());
    const float* ref_last = &ref[(seq.size() - 1) * V];
    for (int i = 0; i < V; ++i) max_err = std::max(max_err, static_cast<double>(std::fabs(logits[i] - ref_last[i])));
    const int tok = argmax(logits.data(), V);
    ASSERT_EQ(tok, argmax(ref_last, V)) << "step " << step;
    seq.push_back(tok);
    ForwardBatch b = make_batch(mgr, {{1, &seq, 1}}, 1);  // split-K decode path
    ASSERT_TRUE(m.forward(b, &logits).ok());
  }
  EXPECT_LT(max_err, 2e-3) << "logits of the cached path drift from the reference";
}

// Steps begun back to back (Model::begin_step, the engine's overlapped steps): step 2 is begun
// before step 1 is ended, its decodes naming step 1's draws by placeholder; end_step gives the
// steps' tokens in the order begun, and step 2's equal a second model's given step 1's tokens as
// ids (seeded sampled rows: the same draws). A placeholder past the step before's rows, one after
// a step that failed to begin, a third step begun, and an end with none begun are refused.
TEST(LlamaModel, StepsBegunBackToBackTakeTheStepBeforesDrawsByPlaceholder) {
  LlamaModel m = load_tiny(64, 4), twin = load_tiny(64, 4);
  KVCacheManager mgr(small_cache()), twin_mgr(small_cache());
  std::mt19937 rng(32);
  std::vector<int32_t> a(6), b(3);
  for (auto& t : a) t = std::uniform_int_distribution<int>(3, 500)(rng);
  for (auto& t : b) t = std::uniform_int_distribution<int>(3, 500)(rng);
  int32_t cached;
  for (KVCacheManager* g : {&mgr, &twin_mgr}) {
    ASSERT_TRUE(g->add_sequence(1, a.data(), 6, 0, &cached).ok());
    ASSERT_TRUE(g->add_sequence(2, b.data(), 3, 0, &cached).ok());
  }
  std::vector<SampleRow> rows(2);
  rows[1].temperature = 0.9f, rows[1].seed = 77, rows[1].step = 0;  // row 0 greedy (temperature 0)
  rows[0].temperature = 0.f;
  const ForwardBatch step1 = make_batch(mgr, {{1, &a, 6}, {2, &b, 3}}, 0);
  ASSERT_TRUE(m.begin_step(step1, rows).ok());
  // Step 2 names step 1's draws: the sequences' 7th and 4th tokens, not known here yet.
  std::vector<SampleRow> rows2 = rows;
  rows2[1].step = 1;
  ForwardBatch step2;
  {
    std::vector<int64_t> slots;
    std::vector<BlockCopy> copies;
    ASSERT_TRUE(mgr.allocate_slots(1, a, 1, &slots, &copies, 1).ok());
    ASSERT_TRUE(mgr.allocate_slots(2, b, 1, &slots, &copies, 1).ok());
    step2.num_decode = 2;
    step2.tokens = {-1, -2};
    step2.cu_seqlens_q = {0, 1, 2};
    step2.seq_lens = {7, 4};
    step2.block_table_stride = mgr.config().max_blocks_per_seq;
    step2.block_tables.assign(static_cast<size_t>(2 * step2.block_table_stride), 0);
    for (int i = 0; i < 2; ++i)
      std::copy(mgr.block_table(i + 1)->begin(), mgr.block_table(i + 1)->end(),
                step2.block_tables.begin() + i * step2.block_table_stride);
    step2.slot_mapping = slots;
  }
  ForwardBatch bad = step2;
  bad.tokens[1] = -3;
  EXPECT_EQ(m.begin_step(bad, rows2).code(), StatusCode::kOutOfRange) << "row 2 of a step of 2 rows";
  EXPECT_EQ(m.begin_step(step2, rows2).code(), StatusCode::kOutOfRange) << "after a step that failed to begin";
  // Again on a fresh model (its cache empty: step 1's K/V written again), as the engine does it.
  LlamaModel m2 = load_tiny(64, 4);
  ASSERT_TRUE(m2.begin_step(step1, rows).ok());
  ASSERT_TRUE(m2.begin_step(step2, rows2).ok());
  EXPECT_FALSE(m2.begin_step(step2, rows2).ok()) << "a third step begun";
  std::vector<int32_t> t1, t2;
  std::vector<TokenLogprobs> lp;
  ASSERT_TRUE(m2.end_step(&t1, &lp).ok());
  ASSERT_TRUE(m2.end_step(&t2, &lp).ok());
  EXPECT_FALSE(m2.end_step(&t2, &lp).ok()) << "an end with no step begun";
  ASSERT_EQ(t1.size(), 2u);
  ASSERT_EQ(t2.size(), 2u);
  // The twin, one step at a time, step 2's tokens given as ids.
  std::vector<int32_t> u1, u2;
  ASSERT_TRUE(twin.forward_and_sample(make_batch(twin_mgr, {{1, &a, 6}, {2, &b, 3}}, 0), rows, &u1).ok());
  EXPECT_EQ(t1, u1);
  std::vector<int32_t> a_known = a, b_known = b;
  a_known.push_back(u1[0]), b_known.push_back(u1[1]);
  ASSERT_TRUE(twin.forward_and_sample(make_batch(twin_mgr, {{1, &a_known, 1}, {2, &b_known, 1}}, 2), rows2, &u2).ok());
  EXPECT_EQ(t2, u2);
}

// Two sequences sharing a cached prefix, in one batch: one decoding, one prefilling.
TEST(LlamaModel, MixedBatchWithPrefixReuse) {
  LlamaModel m = load_tiny(64, 4);
  const int V = m.config().vocab_size;
  KVCacheManager mgr(small_cache());
  std::vector<int32_t> a = {5, 9, 11, 300, 42, 17, 8, 99, 123, 7};
  int32_t cached;
  ASSERT_TRUE(mgr.add_sequence(1, a.data(), 10, 0, &cached).ok());
  std::vector<float> logits;
  ForwardBatch b1 = make_batch(mgr, {{1, &a, 10}}, 0);
  ASSERT_TRUE(m.forward(b1, &logits).ok());
  const int next_a = argmax(logits.data(), V);
  std::vector<int32_t> bseq(a.begin(), a.begin() + 9);
  bseq.push_back(400);
  bseq.push_back(401);  // shares the first 8 tokens (2 blocks) with a
  ASSERT_TRUE(mgr.add_sequence(2, bseq.data(), 11, 0, &cached).ok());
  ASSERT_EQ(cached, 8);
  std::vector<int32_t> a2 = a;
  a2.push_back(next_a);
  ForwardBatch b2 = make_batch(mgr, {{1, &a2, 1}, {2, &bseq, 3}}, 1);  // b's 3 after the cached 8
  ASSERT_TRUE(m.forward(b2, &logits).ok());
  std::vector<float> ref_a, ref_b;
  ASSERT_TRUE(m.reference_forward(a2, &ref_a).ok());
  ASSERT_TRUE(m.reference_forward(bseq, &ref_b).ok());
  for (int i = 0; i < V; ++i) {
    ASSERT_NEAR(logits[i], ref_a[(a2.size() - 1) * V + i], 2e-3);
    ASSERT_NEAR(logits[V + i], ref_b[(bseq.size() - 1) * V + i], 2e-3);
  }
  ForwardBatch bad = b2;
  bad.tokens[0] = V;  // a token id past the vocabulary
  EXPECT_EQ(m.forward(bad, &logits).code(), StatusCode::kOutOfRange);
}

// --kv-cache-dtype and --kv-cache-scale (server/model/kv_cache_options.h): the choices, and
// every bad value refused with a message naming the flag.
TEST(KvCacheOptions, ParsesTheFlagsAndRefusesBadValues) {
  DType t = DType::kFloat32;
  ASSERT_TRUE(parse_kv_cache_dtype("auto", DType::kBFloat16, &t).ok());
  EXPECT_EQ(t, DType::kBFloat16);
  for (DType want : {DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3, DType::kFp8E5M2}) {
    ASSERT_TRUE(parse_kv_cache_dtype(dtype_name(want), DType::kFloat32, &t).ok());
    EXPECT_EQ(t, want);
  }
  for (const char* bad : {"", "fp8", "fp32", "FP8_E4M3", "int8", "bf16 "}) {
    const Status st = parse_kv_cache_dtype(bad, DType::kFloat32, &t);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(st.message().find("--kv-cache-dtype"), std::string::npos) << st.message();
  }
  float k = 0, v = 0;
  ASSERT_TRUE(parse_kv_cache_scale("0.05", &k, &v).ok());
  EXPECT_EQ(k, 0.05f);
  EXPECT_EQ(v, 0.05f);
  ASSERT_TRUE(parse_kv_cache_scale("0.125,3e-3", &k, &v).ok());
  EXPECT_EQ(k, 0.125f);
  EXPECT_EQ(v, 3e-3f);
  for (const char* bad : {"", ",", "0", "-1", "0,1", "1,0", "nan", "1,nan", "inf", "1e39", "x", "1,2,3", "1,", ",1",
                          " 1", "1x", "-0"}) {
    const Status st = parse_kv_cache_scale(bad, &k, &v);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << "'" << bad << "'";
    EXPECT_NE(st.message().find("--kv-cache-scale"), std::string::npos) << st.message();
  }
  KvCacheOptions o;  // scales given for a cache that is not FP8
  o.k_scale = o.v_scale = 1.f;
  EXPECT_EQ(o.validate().code(), StatusCode::kInvalidArgument);
  o.dtype = DType::kFp8E4M3;
  EXPECT_TRUE(o.validate().ok());
  o.v_scale = std::nanf("");
  EXPECT_EQ(o.validate().code(), StatusCode::kInvalidArgument);
  LlamaConfig c;
  ASSERT_TRUE(synthetic_preset("tiny", &c).ok());
  LlamaWeights w;
  ASSERT_TRUE(synthetic_weights(c, 42, &w).ok());
  LlamaModel m;
  EXPECT_EQ(LlamaModel::create(c, std::move(w), 8, 4, &m, o).code(), StatusCode::kInvalidArgument);
}

KvCacheOptions cache_of(DType t) {
  KvCacheOptions o;
  o.dtype = t;
  return o;
}

// The tiny model over each cache dtype: chunked prefill (5 + 5 + 3) then 12 split-K decode
// steps, teacher-forced on the reference's greedy tokens; each step's logits against the
// no-cache fp32 reference. fp32 is the reference's own (2e-3 as above); bf16/fp16 round K/V;
// FP8 (calibrated on the first prefill) costs more, e5m2 (2 mantissa bits) more than e4m3 (3).
// Measured max |dlogit| (seed 3): fp32 2.2e-6, bf16 4.4e-3, fp16 9.0e-4, e4m3 0.088, e5m2 0.158.
TEST(LlamaModel, CachedForwardPerCacheDtype) {
  LlamaConfig c;
  ASSERT_TRUE(synthetic_preset("tiny", &c).ok());
  const int V = c.vocab_size;
  std::mt19937 rng(3);
  std::vector<int32_t> prompt(13);
  for (auto& t : prompt) t = std::uniform_int_distribution<int>(3, V - 1)(rng);
  std::map<DType, double> err;
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFp8E4M3, DType::kFp8E5M2}) {
    LlamaWeights w;
    ASSERT_TRUE(synthetic_weights(c, 42, &w).ok());
    LlamaModel m;
    ASSERT_TRUE(LlamaModel::create(c, std::move(w), 64, 4, &m, cache_of(t)).ok());
    EXPECT_EQ(m.kv_shape().dtype, t);
    KVCacheManager mgr(small_cache());
    int32_t cached;
    ASSERT_TRUE(mgr.add_sequence(1, prompt.data(), 13, 0, &cached).ok());
    std::vector<float> logits;
    for (int start = 0; start < 13; start += 5) {
      ForwardBatch b = make_batch(mgr, {{1, &prompt, std::min(13, start + 5) - start}}, 0);
      ASSERT_TRUE(m.forward(b, &logits).ok()) << dtype_name(t);
    }
    std::vector<int32_t> seq = prompt;
    double max_err = 0;
    for (int step = 0; step < 12; ++step) {
      std::vector<float> ref;
      ASSERT_TRUE(m.reference_forward(seq, &ref).ok());
      const float* ref_last = &ref[(seq.size() - 1) * V];
      for (int i = 0; i < V; ++i) {
        ASSERT_FALSE(std::isnan(logits[i])) << dtype_name(t);
        max_err = std::max(max_err, static_cast<double>(std::fabs(logits[i] - ref_last[i])));
      }
      seq.push_back(argmax(ref_last, V));
      ForwardBatch b = make_batch(mgr, {{1, &seq, 1}}, 1);
      ASSERT_TRUE(m.forward(b, &logits).ok()) << dtype_name(t);
    }
    err[t] = max_err;
    std::printf("cache %s: max |dlogit| %.3g over 12 decode steps\n", dtype_name(t), max_err);
  }
  EXPECT_LT(err[DType::kFloat32], 2e-3);
  EXPECT_LT(err[DType::kFloat16], 1e-2);
  EXPECT_LT(err[DType::kBFloat16], 5e-2);
  EXPECT_LT(err[DType::kFp8E4M3], 0.25);
  EXPECT_LT(err[DType::kFp8E5M2], 0.5);
  EXPECT_LT(err[DType::kFloat32], err[DType::kBFloat16]);  // the cache dtype matters, in the expected order
  EXPECT_LT(err[DType::kBFloat16], err[DType::kFp8E4M3]);
  EXPECT_LT(err[DType::kFp8E4M3], err[DType::kFp8E5M2]);
}

// The largest |fp8 value| of layer `l`, kv head `h` over the slots [0, n): with calibrated scales
// (amax · headroom / max), the first prefill's largest element lands on max / headroom.
float largest_code_value(const LlamaModel& m, int32_t l, int32_t h, int64_t n, bool keys) {
  const KVStorage& kv = const_cast<LlamaModel&>(m).kv();
  const KVPageView pv = kv.view(l, nullptr, 0, nullptr);
  const auto* pages = static_cast<const uint8_t*>(keys ? kv.k_pages(l) : kv.v_pages(l));
  float best = 0.f;
  for (int64_t slot = 0; slot < n; ++slot)
    for (int32_t d = 0; d < m.config().head_dim; ++d) {
      const uint8_t code = pages[pv.offset_of_slot(slot, h) + d];
      const float x = kv.shape().dtype == DType::kFp8E4M3 ? fp8_e4m3_to_float(code) : fp8_e5m2_to_float(code);
      best = std::max(best, std::fabs(x));
    }
  return best;
}

// Calibration and its fixed point: before the first prefill no layer has scales; the first
// prefill sets every (layer, kv head)'s so that its largest |K| (|V|) maps to max / headroom
// (224 for e4m3, 28672 for e5m2: exactly, by round to nearest); a second sequence's prefill, a
// decode step and a prompt of larger values change nothing.
TEST(LlamaModel, Fp8ScalesCalibratedOnTheFirstPrefillThenFixed) {
  LlamaConfig c;
  ASSERT_TRUE(synthetic_preset("tiny", &c).ok());
  for (DType t : {DType::kFp8E4M3, DType::kFp8E5M2}) {
    LlamaWeights w;
    ASSERT_TRUE(synthetic_weights(c, 42, &w).ok());
    LlamaModel m;
    ASSERT_TRUE(LlamaModel::create(c, std::move(w), 64, 4, &m, cache_of(t)).ok());
    for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
      EXPECT_FALSE(m.kv_scales().fixed(l));
      EXPECT_EQ(m.kv_scales().source(l), "");
    }
    KVCacheManager mgr(small_cache());
    std::vector<int32_t> a = {5, 9, 11, 300, 42, 17, 8, 99, 123};  // 9 tokens: slots 4..12 (block 0 is null)
    int32_t cached;
    ASSERT_TRUE(mgr.add_sequence(1, a.data(), 9, 0, &cached).ok());
    std::vector<float> logits;
    ForwardBatch b1 = make_batch(mgr, {{1, &a, 9}}, 0);
    ASSERT_TRUE(m.forward(b1, &logits).ok());
    const float target = fp8_max(t) / kDefaultCalibrationHeadroom;
    std::vector<float> scales;
    for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
      EXPECT_EQ(m.kv_scales().source(l), "calibrated");
      for (int32_t h = 0; h < c.num_key_value_heads; ++h) {
        EXPECT_EQ(largest_code_value(m, l, h, 4 * 64, true), target) << dtype_name(t) << " layer " << l << " head " << h;
        EXPECT_EQ(largest_code_value(m, l, h, 4 * 64, false), target) << dtype_name(t) << " layer " << l << " head " << h;
        scales.push_back(m.kv().k_scales(l)[h]);
        scales.push_back(m.kv().v_scales(l)[h]);
        EXPECT_GT(m.kv().k_scales(l)[h], 0.f);
        EXPECT_NE(m.kv().k_scales(l)[h], m.kv().v_scales(l)[h]);
      }
    }
    std::vector<int32_t> b = {400, 401, 402, 7, 7, 7, 300, 300, 1, 2, 3};  // another sequence, another prompt
    ASSERT_TRUE(mgr.add_sequence(2, b.data(), 11, 0, &cached).ok());
    std::vector<int32_t> a2 = a;
    a2.push_back(argmax(logits.data(), c.vocab_size));
    ForwardBatch b2 = make_batch(mgr, {{1, &a2, 1}, {2, &b, 11}}, 1);
    ASSERT_TRUE(m.forward(b2, &logits).ok());
    std::vector<float> after;
    for (int32_t l = 0; l < c.num_hidden_layers; ++l)
      for (int32_t h = 0; h < c.num_key_value_heads; ++h) {
        after.push_back(m.kv().k_scales(l)[h]);
        after.push_back(m.kv().v_scales(l)[h]);
      }
    EXPECT_EQ(after, scales) << dtype_name(t) << ": scales changed after the first prefill";
  }
}

// Scales from the checkpoint (k_scale [1]: every kv head; v_scale [kv_heads]: one a head) and
// from --kv-cache-scale, which wins; bad checkpoint scales are refused at load by name.
TEST(LlamaModel, Fp8ScalesFromTheCheckpointOrTheFlag) {
  LlamaConfig c;
  ASSERT_TRUE(synthetic_preset("tiny", &c).ok());
  const std::string dir = temp_dir("fp8scales");
  std::ofstream(dir + "/config.json") << kTinyConfigJson;
  auto write_with = [&](std::vector<float> k, std::vector<float> v) {
    LlamaWeights w;
    EXPECT_TRUE(synthetic_weights(c, 42, &w).ok());
    for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
      w.layers[l].k_scale = k;
      w.layers[l].v_scale = v;
      for (float& x : w.layers[l].k_scale) x *= static_cast<float>(l + 1);
    }
    EXPECT_TRUE(write_safetensors(dir + "/model.safetensors", weights_as_tensors(c, w, DType::kBFloat16)).ok());
  };
  write_with({0.03f}, {0.01f, 0.02f});
  LlamaConfig lc;
  LlamaWeights lw;
  ASSERT_TRUE(load_model_folder(dir, &lc, &lw).ok());
  ASSERT_EQ(lw.layers[1].k_scale, std::vector<float>{0.06f});
  LlamaWeights lw2 = lw;
  LlamaModel m;
  ASSERT_TRUE(LlamaModel::create(lc, std::move(lw), 16, 4, &m, cache_of(DType::kFp8E4M3)).ok());
  for (int32_t l = 0; l < c.num_hidden_layers; ++l) {
    EXPECT_EQ(m.kv_scales().source(l), "checkpoint");
    for (int32_t h = 0; h < c.num_key_value_heads; ++h) {
      EXPECT_EQ(m.kv().k_scales(l)[h], 0.03f * static_cast<float>(l + 1));
      EXPECT_EQ(m.kv().v_scales(l)[h], h == 0 ? 0.01f : 0.02f);
    }
  }
  KvCacheOptions flag = cache_of(DType::kFp8E5M2);
  flag.k_scale = 0.5f;
  flag.v_scale = 0.25f;
  LlamaModel f;
  ASSERT_TRUE(LlamaModel::create(lc, std::move(lw2), 16, 4, &f, flag).ok());
  EXPECT_EQ(f.kv_scales().source(1), "--kv-cache-scale");
  EXPECT_EQ(f.kv().k_scales(1)[1], 0.5f);
  EXPECT_EQ(f.kv().v_scales(0)[0], 0.25f);
  // Bad scales in the checkpoint: zero, negative, NaN, inf, a shape that is not [], [1] or [kv_heads].
  for (const auto& [k, what] : {std::pair{std::vector<float>{0.f}, "k_scale[0] = 0"},
                                std::pair{std::vector<float>{-0.5f}, "must be finite and > 0"},
                                std::pair{std::vector<float>{std::nanf("")}, "must be finite and > 0"},
                                std::pair{std::vector<float>{INFINITY}, "must be finite and > 0"},
                                std::pair{std::vector<float>{1.f, 1.f, 1.f}, "must have shape"}}) {
    write_with(k, {0.01f});
    LlamaWeights bad;
    const Status st = load_model_folder(dir, &lc, &bad);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << what;
    EXPECT_NE(st.message().find("self_attn.k_scale"), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();
  }
  write_with({0.5f}, {});  // a k_scale without its v_scale
  LlamaWeights half;
  const Status st = load_model_folder(dir, &lc, &half);
  EXPECT_NE(st.message().find("has a k_scale but no v_scale"), std::string::npos) << st.message();
  std::filesystem::remove_all(dir);
}

// The scale policy's own object (both models keep one): which layers wait for calibration, the
// sources, the start-up line (the scales' shortest round-trip text), a pool that is not FP8.
TEST(KvScales, PolicySourcesAndDescription) {
  KVStorageShape sh;
  sh.num_layers = 2;
  sh.num_blocks = 4;
  sh.num_kv_heads = 2;
  sh.block_size = 16;
  sh.head_dim = 8;
  sh.dtype = DType::kFp8E4M3;
  KVStorage pool;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, sh, &pool).ok());
  KvScales fixed;
  KvCacheOptions kv;
  kv.dtype = DType::kFp8E4M3;
  kv.k_scale = 0.0123456789f;
  kv.v_scale = 1234567.f;
  ASSERT_TRUE(fixed.init(kv, nullptr, &pool).ok());
  EXPECT_FALSE(fixed.pending());
  EXPECT_EQ(fixed.source(1), "--kv-cache-scale");
  EXPECT_EQ(fixed.describe(), "--kv-cache-scale K 0.012345679 V 1234567, every layer and kv head");
  EXPECT_EQ(pool.k_scales(1)[1], 0.0123456789f);
  const float amax[2] = {4.48f, 0.f};
  EXPECT_EQ(fixed.calibrate(0, amax, amax, &pool).code(), StatusCode::kInternal);  // fixed: not again

  KvScales calibrated;
  kv.k_scale = kv.v_scale = 0.f;
  ASSERT_TRUE(calibrated.init(kv, nullptr, &pool).ok());
  EXPECT_TRUE(calibrated.pending());
  EXPECT_TRUE(calibrated.needs_calibration(0));
  EXPECT_EQ(calibrated.describe(), "calibrated on each layer's first prefill, then fixed");
  ASSERT_TRUE(calibrated.calibrate(0, amax, amax, &pool).ok());
  EXPECT_TRUE(calibrated.pending());  // layer 1 still waits
  EXPECT_EQ(calibrated.source(0), "calibrated");
  EXPECT_EQ(pool.k_scales(0)[0], 4.48f * kDefaultCalibrationHeadroom / 448.f);
  EXPECT_EQ(pool.k_scales(0)[1], 1.f);  // an all-zero head keeps 1.0
  ASSERT_TRUE(calibrated.calibrate(1, amax, amax, &pool).ok());
  EXPECT_FALSE(calibrated.pending());

  sh.dtype = DType::kBFloat16;
  KVStorage bf16;
  ASSERT_TRUE(KVStorage::create(Device::kCPU, sh, &bf16).ok());
  KvScales none;
  ASSERT_TRUE(none.init(KvCacheOptions{DType::kBFloat16}, nullptr, &bf16).ok());
  EXPECT_FALSE(none.pending());
  EXPECT_FALSE(none.needs_calibration(0));
  EXPECT_EQ(none.source(0), "");  // not FP8: no source, no throw
  EXPECT_EQ(none.describe(), "none (not an FP8 cache)");
}

}  // namespace
}  // namespace flashserve::model
