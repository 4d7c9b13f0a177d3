// What the KV cache's element type costs the CPU model end to end (issue 25): perplexity of a
// fixed text by teacher forcing through the paged cache, and greedy agreement, per cache dtype.
//
// For each cache dtype the model (one LlamaModel per dtype, the same weights) takes the text's
// first --prefill tokens as one prefill (which calibrates FP8 scales: server/model/
// kv_cache_options.h), then every later token as a decode step over the pages: the logits before
// token i score it (log-softmax in float64), so every scored token reads all earlier K/V from the
// cache in its dtype. ppl = exp(mean NLL over the scored tokens); top-1 = how often the argmax
// before a token equals the first dtype's. Then greedy: each prompt prefilled, --greedy tokens
// decoded by argmax; agreement = positions where the tokens equal the first dtype's, over all
// positions (after the first difference the sequences go apart, so a late one costs less), and
// the mean length of the common prefix. The scales stay as the text's first prefill fixed them.
//
// Usage: kv_cache_ppl MODEL [--text FILE] [--prefill N] [--max-tokens N] [--greedy N]
//                     [--headroom H] [--dtypes fp32,bf16,fp8_e4m3,fp8_e5m2] [--device cpu|cuda]
// MODEL: a .gguf file or model folder with a tokenizer, or synthetic:tiny (token ids from a
// fixed seed: no text). The first dtype is the baseline. --device cuda: the CUDA model (bf16
// weights and activations; its caches bf16, fp8_e4m3, fp8_e5m2: the greedy agreement of
// the GPU Llama with an FP8 cache against bf16).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "server/model/gguf.h"
#include "server/model/gguf_weights.h"
#include "server/model/llama.h"
#include "server/text/text_model.h"
#if FLASHSERVE_WITH_CUDA
#include "server/model/cuda/llama_cuda.h"
#endif

using namespace flashserve;
using namespace flashserve::model;

namespace {

constexpr int32_t kBlockSize = 16;

struct Run {
  std::string name;
  double nll = 0;
  int64_t scored = 0;
  std::vector<int32_t> top1;                 // argmax before each scored token
  std::vector<std::vector<int32_t>> greedy;  // per prompt
};

// One sequence at positions [start, start + n) of tokens, written from block 1 on (block 0 is the
// null block); *logits gets the logits after its last token.
Status step(Model& m, const std::vector<int32_t>& tokens, int64_t start, int64_t n, std::vector<float>* logits) {
  ForwardBatch b;
  b.num_decode = n == 1 && start > 0 ? 1 : 0;
  b.tokens.assign(tokens.begin() + start, tokens.begin() + start + n);
  b.cu_seqlens_q = {0, static_cast<int32_t>(n)};
  b.seq_lens = {static_cast<int32_t>(start + n)};
  b.block_table_stride = m.kv_shape().num_blocks - 1;
  for (int32_t i = 0; i < b.block_table_stride; ++i) b.block_tables.push_back(i + 1);
  for (int64_t i = start; i < start + n; ++i) b.slot_mapping.push_back(kBlockSize + i);
  return m.forward(b, logits);
}

double log_softmax_at(const std::vector<float>& logits, int32_t token) {
  const double mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - mx);
  return static_cast<double>(logits[token]) - mx - std::log(sum);
}

int32_t argmax(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, sep);) out.push_back(part);
  return out;
}

int fail(const std::string& what, const Status& st) {
  std::fprintf(stderr, "kv_cache_ppl: %s: %s\n", what.c_str(), st.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: kv_cache_ppl MODEL [--text FILE] [--prefill N] [--max-tokens N] [--greedy N] [--headroom H] "
                 "[--dtypes fp32,bf16,fp8_e4m3,fp8_e5m2] [--device cpu|cuda]\n");
    return 2;
  }
  const std::string model = argv[1];
  std::string text_file, dtypes, device = "cpu";
  int64_t prefill = 64, max_tokens = 1024, greedy = 32;
  float headroom = kDefaultCalibrationHeadroom;
  for (int i = 2; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--text") text_file = v;
    else if (k == "--prefill") prefill = std::atoll(v.c_str());
    else if (k == "--max-tokens") max_tokens = std::atoll(v.c_str());
    else if (k == "--greedy") greedy = std::atoll(v.c_str());
    else if (k == "--headroom") headroom = std::strtof(v.c_str(), nullptr);
    else if (k == "--dtypes") dtypes = v;
    else if (k == "--device") device = v;
    else {
      std::fprintf(stderr, "kv_cache_ppl: unknown option %s\n", k.c_str());
      return 2;
    }
  }
  if (device != "cpu" && device != "cuda") return fail("--device", invalid_argument("cpu or cuda, got " + device));
  if (dtypes.empty()) dtypes = device == "cuda" ? "bf16,fp8_e4m3,fp8_e5m2" : "fp32,bf16,fp8_e4m3,fp8_e5m2";
  LlamaConfig config;
  LlamaWeights weights;
  Status st;
  const bool synthetic = model.rfind("synthetic:", 0) == 0;
  if (synthetic) {
    st = synthetic_preset(model.substr(10), &config);
    if (st.ok()) st = synthetic_weights(config, 1, &weights);
  } else if (is_gguf_file(model)) {
    st = load_gguf_model(model, &config, &weights);
  } else {
    st = load_model_folder(model, &config, &weights);
  }
  if (!st.ok()) return fail("model " + model, st);

  // The text's tokens and the greedy prompts (synthetic: ids from a fixed seed).
  std::vector<int32_t> text;
  std::vector<std::vector<int32_t>> prompts;
  if (synthetic) {
    std::mt19937 rng(25);
    std::uniform_int_distribution<int32_t> id(3, config.vocab_size - 1);
    text.resize(static_cast<size_t>(std::min<int64_t>(max_tokens, 256)));
    for (auto& t : text) t = id(rng);
    for (int p = 0; p < 4; ++p) {
      prompts.emplace_back(9 + 5 * p);
      for (auto& t : prompts.back()) t = id(rng);
    }
  } else {
    text::TextModel tm;
    if (Status ts = text::TextModel::load(model, "", &tm); !ts.ok() || !tm.has_tokenizer())
      return fail("tokenizer of " + model, ts.ok() ? invalid_argument("none") : ts);
    std::ifstream f(text_file);
    if (!f) return fail("text", invalid_argument("cannot read --text '" + text_file + "'"));
    std::stringstream all;
    all << f.rdbuf();
    if (Status es = tm.encode_text(all.str(), true, &text); !es.ok()) return fail("tokenize", es);
    for (const char* p : {"The capital of France is", "Water boils at a temperature of",
                          "Once upon a time, in a small village by the sea,",
                          "To sort a list of numbers in Python, you can", "The three primary colours are",
                          "A good breakfast before a long walk should include"}) {
      prompts.emplace_back();
      if (Status es = tm.encode_text(p, true, &prompts.back()); !es.ok()) return fail("tokenize", es);
    }
  }
  if (static_cast<int64_t>(text.size()) > max_tokens) text.resize(static_cast<size_t>(max_tokens));
  const int64_t N = static_cast<int64_t>(text.size());
  if (prefill < 1 || prefill >= N) return fail("--prefill", invalid_argument("must be in [1, text tokens)"));
  int64_t longest = N;
  for (const auto& p : prompts) longest = std::max<int64_t>(longest, static_cast<int64_t>(p.size()) + greedy);
  const int32_t num_blocks = static_cast<int32_t>((longest + kBlockSize - 1) / kBlockSize + 1);
  std::printf("model %s: %lld text tokens, the first %lld prefilled (FP8 calibration), %lld scored; %zu prompts x "
              "%lld greedy tokens; calibration headroom %g; on %s\n",
              model.c_str(), static_cast<long long>(N), static_cast<long long>(prefill),
              static_cast<long long>(N - prefill), prompts.size(), static_cast<long long>(greedy), headroom,
              device.c_str());

  std::vector<Run> runs;
  for (const std::string& name : split(dtypes, ',')) {
    Run r;
    r.name = name;
    KvCacheOptions kv;
    kv.calibration_headroom = headroom;
    if (Status ds = parse_kv_cache_dtype(name == "fp32" ? "auto" : name,
                                         device == "cuda" ? DType::kBFloat16 : DType::kFloat32, &kv.dtype);
        !ds.ok())
      return fail("--dtypes", ds);
    // The model on its device; its pool and scales (the same calls on both).
    std::unique_ptr<Model> owner;
    const KVStorage* pool = nullptr;
    const KvScales* scales = nullptr;
    if (device == "cpu") {
      auto cpu = std::make_unique<LlamaModel>();
      if (Status cs = LlamaModel::create(config, weights, num_blocks, kBlockSize, cpu.get(), kv); !cs.ok())
        return fail("model " + name, cs);
      pool = &cpu->kv();
      scales = &cpu->kv_scales();
      owner = std::move(cpu);
    } else {
#if FLASHSERVE_WITH_CUDA
      CudaModelOptions opt;
      opt.num_blocks = num_blocks;
      opt.block_size = kBlockSize;
      opt.max_tokens_per_step = static_cast<int32_t>(longest);
      opt.max_batch = 1;
      opt.max_blocks_per_seq = num_blocks - 1;
      opt.kv = kv;
      std::unique_ptr<LlamaCudaModel> gpu;
      if (Status cs = LlamaCudaModel::create(config, &weights, 0, opt, &gpu); !cs.ok()) return fail("model " + name, cs);
      pool = &gpu->kv();
      scales = &gpu->kv_scales();
      owner = std::move(gpu);
#else
      return fail("--device cuda", unsupported("this build has no CUDA"));
#endif
    }
    Model& m = *owner;
    std::vector<float> logits;
    if (Status ps = step(m, text, 0, prefill, &logits); !ps.ok()) return fail("prefill", ps);
    for (int64_t i = prefill; i < N; ++i) {  // logits before token i score it; then token i goes in
      r.nll -= log_softmax_at(logits, text[i]);
      r.top1.push_back(argmax(logits));
      ++r.scored;
      if (i + 1 < N)
        if (Status ds = step(m, text, i, 1, &logits); !ds.ok()) return fail("decode", ds);
    }
    for (const auto& prompt : prompts) {
      std::vector<int32_t> seq = prompt;
      const int64_t P = static_cast<int64_t>(prompt.size());
      if (Status ps = step(m, seq, 0, P, &logits); !ps.ok()) return fail("prompt", ps);
      std::vector<int32_t> out;
      for (int64_t g = 0; g < greedy; ++g) {
        out.push_back(argmax(logits));
        seq.push_back(out.back());
        if (g + 1 < greedy)
          if (Status ds = step(m, seq, P + g, 1, &logits); !ds.ok()) return fail("greedy", ds);
      }
      r.greedy.push_back(out);
    }
    if (is_fp8(kv.dtype)) {
      double lo = INFINITY, hi = 0;
      for (int32_t l = 0; l < config.num_hidden_layers; ++l)
        for (int32_t h = 0; h < config.num_key_value_heads; ++h)
          for (const float* s : {pool->k_scales(l), pool->v_scales(l)}) {
            lo = std::min<double>(lo, s[h]);
            hi = std::max<double>(hi, s[h]);
          }
      std::printf("  %s scales (%s): %.4g .. %.4g over %d layers x %d kv heads, K and V\n", name.c_str(),
                  scales->source(0).c_str(), lo, hi, config.num_hidden_layers, config.num_key_value_heads);
    }
    runs.push_back(std::move(r));
    std::fflush(stdout);
  }

  const Run& base = runs[0];
  const double base_ppl = std::exp(base.nll / base.scored);
  std::printf("\n| cache | ppl | dppl vs %s | top-1 = %s | greedy tokens = %s | common prefix (of %lld) |\n",
              base.name.c_str(), base.name.c_str(), base.name.c_str(), static_cast<long long>(greedy));
  std::printf("|---|---|---|---|---|---|\n");
  for (const Run& r : runs) {
    const double ppl = std::exp(r.nll / r.scored);
    int64_t same1 = 0, same_greedy = 0, total_greedy = 0, prefix = 0;
    for (size_t i = 0; i < r.top1.size(); ++i) same1 += r.top1[i] == base.top1[i];
    for (size_t p = 0; p < r.greedy.size(); ++p) {
      bool still = true;
      for (size_t g = 0; g < r.greedy[p].size(); ++g) {
        const bool eq = r.greedy[p][g] == base.greedy[p][g];
        same_greedy += eq;
        ++total_greedy;
        still = still && eq;
        prefix += still;
      }
    }
    std::printf("| %s | %.4f | %+.4f (%+.3f%%) | %.2f%% | %.2f%% | %.1f |\n", r.name.c_str(), ppl, ppl - base_ppl,
                100.0 * (ppl - base_ppl) / base_ppl, 100.0 * same1 / r.top1.size(),
                100.0 * same_greedy / std::max<int64_t>(total_greedy, 1),
                static_cast<double>(prefix) / std::max<size_t>(r.greedy.size(), 1));
  }
  return 0;
}
