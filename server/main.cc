// flashserve_server: the gRPC serving process. Loads a model (a Hugging Face folder or
// synthetic:NAME), starts the engine and the gRPC server, and drains on SIGTERM/SIGINT (stops
// taking requests, lets running ones finish within --grace-period, aborts the rest, exits 0); a
// second signal ends the grace period, a signal before it is ready exits 0 at once
// (server/signals.h).
// Every flag has an environment twin (FLASHSERVE_<FLAG>).
#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string_view>
#include <thread>
#include <vector>

#include "kvcache/sizing.h"
#include "server/engine/engine.h"
#include "server/grpc/logging.h"
#include "server/grpc/server.h"
#include "server/model/config.h"
#include "server/model/gguf.h"
#include "server/model/gguf_weights.h"
#include "server/model/kv_cache_options.h"
#include "server/model/llama.h"
#include "server/signals.h"
#if FLASHSERVE_WITH_CUDA
#include "server/model/cuda/llama_cuda.h"
#endif

using namespace flashserve;

namespace {

// Numeric flags (and their FLASHSERVE_* twins) are checked as they are parsed: the whole value a
// decimal number (std::from_chars: no sign on unsigned ones, no overflow) within its range, NaN
// never; else the flag is refused by name before anything starts. (--port 118496 used to listen
// on 52960, modulo 65536; --seed -1 became 2^64-1; --grace-period nan meant no grace at all.)
template <typename T>
bool parse_number(const std::string& in, T* v) {
  const auto [end, ec] = std::from_chars(in.data(), in.data() + in.size(), *v);
  return ec == std::errc() && end == in.data() + in.size();
}

template <typename T>
CLI::Validator in_range(T lo, T hi) {
  std::ostringstream range;
  range << "in [" << lo << ", " << hi << "]";
  return CLI::Validator(
      [lo, hi, r = range.str()](std::string& in) -> std::string {
        T v{};
        if (!parse_number(in, &v) || !(v >= lo && v <= hi)) return "'" + in + "' is not a number " + r;
        return {};
      },
      range.str());
}

const CLI::Validator kFraction(
    [](std::string& in) -> std::string {
      double v = 0;
      if (!parse_number(in, &v) || !(v > 0.0 && v <= 1.0)) return "'" + in + "' is not a number in (0, 1]";
      return {};
    },
    "in (0, 1]");

const CLI::Validator kPowerOfTwo(
    [](std::string& in) -> std::string {
      int64_t v = 0;
      if (!parse_number(in, &v) || v < 1 || (v & (v - 1)) != 0) return "'" + in + "' is not a power of two";
      return {};
    },
    "a power of two");

// Bearer tokens from a file (`flag` names it in errors): one a line, line breaks (\n, \r\n)
// dropped, empty lines skipped; unreadable, no token, a token twice, or more than one line where
// `one` is set is an error. Each token is one identity (server/grpc/caller.h).
Status read_token_file(const char* flag, const std::string& path, bool one, std::vector<std::string>* tokens) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalid_argument(std::string(flag) + ": cannot read " + path + ": " + std::strerror(errno));
  std::string line;
  for (int n = 1; std::getline(f, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (line.find('\r') != std::string::npos)
      return invalid_argument(std::string(flag) + ": " + path + " line " + std::to_string(n) + " holds a stray carriage return");
    if (std::find(tokens->begin(), tokens->end(), line) != tokens->end())
      return invalid_argument(std::string(flag) + ": " + path + " line " + std::to_string(n) + " repeats an earlier token");
    tokens->push_back(line);
  }
  if (tokens->empty()) return invalid_argument(std::string(flag) + ": " + path + " holds no token");
  if (one && tokens->size() > 1) return invalid_argument(std::string(flag) + ": " + path + " holds more than one token");
  return Status::Ok();
}

// The model's context length, read before the server listens (the receive limit is set then):
// the preset, the GGUF metadata or config.json. The weights are not read here; a model that
// cannot be read gives the default config's, and its load fails later with the reason.
int64_t peek_context_length(const std::string& model) {
  model::LlamaConfig c;
  if (model.rfind("synthetic:", 0) == 0) {
    if (model::synthetic_preset(model.substr(10), &c).ok()) return c.max_position_embeddings;
  } else if (model::is_gguf_file(model)) {
    model::GgufFile f;
    if (model::GgufFile::open(model, &f).ok() && model::gguf_llama_config(f, &c).ok()) return c.max_position_embeddings;
  } else if (std::ifstream cf(model + "/config.json"); cf) {
    const std::string text((std::istreambuf_iterator<char>(cf)), std::istreambuf_iterator<char>());
    if (model::parse_llama_config(text, &c).ok()) return c.max_position_embeddings;
  }
  return model::LlamaConfig{}.max_position_embeddings;
}

// Each HTTP connection is a descriptor: with a thousand streams the usual soft limit (1024) would
// refuse accepts, so the soft limit goes up to what is wanted, within the hard limit.
void raise_open_files_limit(int64_t want) {
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || static_cast<int64_t>(rl.rlim_cur) >= want)
    return;
  const rlim_t before = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max == RLIM_INFINITY ? static_cast<rlim_t>(want) : std::min(rl.rlim_max, static_cast<rlim_t>(want));
  if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
    spdlog::info("open files limit: {} -> {}", static_cast<uint64_t>(before), static_cast<uint64_t>(rl.rlim_cur));
  if (static_cast<int64_t>(rl.rlim_cur) < want)
    spdlog::warn("open files limit {} is below the {} the HTTP front may use (raise the hard limit: ulimit -Hn)",
                 static_cast<uint64_t>(rl.rlim_cur), want);
}

}  // namespace

int main(int argc, char** argv) {
  server::setup_logging();
  CLI::App app{"flashserve: a gRPC inference server over the flashserve attention backend"};
  std::string model = "synthetic:tiny", device = "cpu";
  server::ServerOptions so;
  engine::EngineConfig ec;
  ec.num_blocks = 1024;
  double grace = 30.0;
  uint64_t seed = 1;
  app.add_option("--model", model,
                 "a .gguf file, a model folder (config.json + *.safetensors [+ tokenizer.json]) or "
                 "synthetic:tiny|llama3-8b")
      ->envname("FLASHSERVE_MODEL");
  app.add_option("--device", device, "cpu or cuda")->envname("FLASHSERVE_DEVICE");
  app.add_option("--host", so.host, "address to listen on")->envname("FLASHSERVE_HOST");
  app.add_option("--port", so.port, "port (0: any free one)")->check(in_range(0, 65535))->envname("FLASHSERVE_PORT");
  // A token on the command line is readable by every local user (/proc/PID/cmdline): the file
  // or the environment twin keep it to the process's owner.
  std::string auth_token_file;
  auto* token_opt = app.add_option("--auth-token", so.auth_token,
                                   "require 'authorization: Bearer <token>' (others can read a command line: "
                                   "prefer --auth-token-file or FLASHSERVE_AUTH_TOKEN)")
                        ->envname("FLASHSERVE_AUTH_TOKEN");
  app.add_option("--auth-token-file", auth_token_file,
                 "read the bearer tokens from this file, one a line: each token is one tenant, which owns its "
                 "requests (their ids, Abort, and with --prefix-cache-isolation its cached prefixes)")
      ->envname("FLASHSERVE_AUTH_TOKEN_FILE")
      ->excludes(token_opt);
  std::string admin_token_file;
  app.add_option("--admin-token-file", admin_token_file,
                 "read an admin bearer token from this file (one line): accepted wherever a token is, and its "
                 "Abort reaches every caller's requests (others abort only their own)")
      ->envname("FLASHSERVE_ADMIN_TOKEN_FILE");
  std::string isolation = "none";
  app.add_option("--prefix-cache-isolation", isolation,
                 "none: every caller shares the prefix cache (the throughput win: a system prompt is computed "
                 "once for all); identity: each caller identity (its token; without tokens, its connection) "
                 "only reuses the prefixes it sent itself, so no one can tell from cached tokens or timing "
                 "what others sent. A request's cache_salt is combined with either")
      ->check(CLI::IsMember({"none", "identity"}))
      ->envname("FLASHSERVE_PREFIX_CACHE_ISOLATION");
  app.add_flag("--open-reflection", so.open_reflection,
               "serve gRPC reflection without the bearer token (by default it needs the token like Generate; "
               "health never does)")
      ->envname("FLASHSERVE_OPEN_REFLECTION");
  app.add_option("--tls-cert", so.tls_cert_file, "TLS certificate (PEM)")->envname("FLASHSERVE_TLS_CERT");
  app.add_option("--tls-key", so.tls_key_file, "TLS private key (PEM)")->envname("FLASHSERVE_TLS_KEY");
  auto* num_blocks_opt = app.add_option("--num-blocks", ec.num_blocks,
                                        "KV cache blocks, the null block included (default: 1024 on the CPU; on CUDA "
                                        "the pool is sized by --gpu-memory-utilization)")
                             ->check(in_range<int32_t>(2, INT32_MAX))
                             ->envname("FLASHSERVE_NUM_BLOCKS");
  // The KV pool from memory, as vLLM sizes it (kvcache/sizing.h): on CUDA, by default, what
  // --gpu-memory-utilization of the device leaves once the weights and activation buffers are
  // allocated; or --kv-cache-memory bytes (CPU or CUDA). At most one of the three flags.
  double gpu_memory_utilization = 0.9;
  auto* utilization_opt =
      app.add_option("--gpu-memory-utilization", gpu_memory_utilization,
                     "CUDA: the share of the device's memory the server may hold (default 0.9); the KV cache gets "
                     "what the weights, buffers and other processes leave of it")
          ->check(kFraction)
          ->envname("FLASHSERVE_GPU_MEMORY_UTILIZATION")
          ->excludes(num_blocks_opt);
  int64_t kv_cache_memory = 0;
  app.add_option("--kv-cache-memory", kv_cache_memory, "bytes of KV cache, instead of --num-blocks or --gpu-memory-utilization")
      ->check(in_range<int64_t>(1, INT64_MAX))
      ->envname("FLASHSERVE_KV_CACHE_MEMORY")
      ->excludes(num_blocks_opt)
      ->excludes(utilization_opt);
  // The cache's element type (issue 25): FP8 halves the bytes a token of bf16 (a quarter of the
  // CPU model's fp32), so the same memory holds twice (four times) the tokens.
  std::string kv_cache_dtype = "auto";
  app.add_option("--kv-cache-dtype", kv_cache_dtype,
                 "the KV cache's element type: auto (the model's: fp32 on the CPU, bf16 on CUDA), bf16, fp16, "
                 "fp8_e4m3 or fp8_e5m2 (1 byte an element, a scale per layer and kv head; CPU only for now)")
      ->check(CLI::IsMember({"auto", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"}))
      ->envname("FLASHSERVE_KV_CACHE_DTYPE");
  std::string kv_cache_scale;
  app.add_option("--kv-cache-scale", kv_cache_scale,
                 "FP8 cache: K[,V] dequantization scales for every layer and kv head (element = scale x fp8 "
                 "code; V = K if one is given); default: the checkpoint's k_scale/v_scale, else calibrated on "
                 "each layer's first prefill (amax x 2 / the format's max), fixed from then on")
      ->check(CLI::Validator(
          [](std::string& in) -> std::string {
            float k = 0, v = 0;
            const Status st = model::parse_kv_cache_scale(in, &k, &v);
            if (st.ok()) return {};
            const std::string prefix = "--kv-cache-scale: ", m = st.message();  // CLI11 names the flag
            return m.rfind(prefix, 0) == 0 ? m.substr(prefix.size()) : m;
          },
          "K[,V]"))
      ->envname("FLASHSERVE_KV_CACHE_SCALE");
  app.add_option("--block-size", ec.block_size, "tokens a KV block")
      ->check(in_range(1, 256))
      ->check(kPowerOfTwo)
      ->envname("FLASHSERVE_BLOCK_SIZE");
  // The step's token budgets by device (issue 27): on CUDA 8192 tokens a step, of which prompt
  // chunks take at most 2048 while decodes run; on the CPU 256 and no prompt budget of its own.
  // Measured on an H100 (bench/NOTES.md "The server's CUDA defaults"): against 256 a step, 8192
  // and 2048 gave 1.3x the output at concurrency 64 and 1.5x at 256, with TTFT 3-8x lower.
  constexpr int32_t kCudaBatchedTokens = 8192, kCudaPrefillTokens = 2048;
  CLI::Option* batched_opt =
      app.add_option("--max-batched-tokens", ec.max_num_batched_tokens,
                     fmt::format("tokens a step (default: {} with --device cuda, {} on the CPU)", kCudaBatchedTokens,
                                 ec.max_num_batched_tokens))
          ->check(in_range<int32_t>(1, INT32_MAX))
          ->envname("FLASHSERVE_MAX_BATCHED_TOKENS");
  // Mixed steps (issue 27): decodes go first; the prompt chunks that share their step get a
  // budget of their own, so that a long prompt does not stretch every decode's step.
  CLI::Option* prefill_opt =
      app.add_option("--max-prefill-tokens", ec.max_prefill_tokens,
                     fmt::format("prompt-chunk tokens a step may take while decodes run (default: {} with --device "
                                 "cuda; 0 on the CPU: no limit but --max-batched-tokens); steps without decodes take "
                                 "the whole --max-batched-tokens",
                                 kCudaPrefillTokens))
          ->check(in_range<int32_t>(0, INT32_MAX))
          ->envname("FLASHSERVE_MAX_PREFILL_TOKENS");
  double tpot_target_ms = 0;
  app.add_option("--tpot-target-ms", tpot_target_ms,
                 "a time-per-output-token target: while decodes run, prompt chunks take the most tokens whose "
                 "forward time, predicted by a step cost model fitted on the server's own steps, stays within it "
                 "(at least max(16, --block-size) tokens a step; within --max-prefill-tokens if set; 0, the "
                 "default: off)")
      ->check(in_range(0.0, 1e6))
      ->envname("FLASHSERVE_TPOT_TARGET_MS");
  // Overlapped steps (issue 27): the next step is prepared and queued while this one runs. On by
  // default on CUDA (measured: bench/NOTES.md "Overlapped steps"), off on the CPU (whose steps run
  // in begin_step: nothing to overlap).
  CLI::Option* overlap_opt =
      app.add_flag("--overlap-steps,!--no-overlap-steps", ec.overlap_steps,
                   "schedule, build and queue step n + 1 while step n runs, its decodes reading step n's draws on "
                   "the device, and hand step n's tokens to their streams meanwhile (default: on with --device cuda, "
                   "off on the CPU; a request that ends by eos or a stop id costs one dropped row)")
          ->envname("FLASHSERVE_OVERLAP_STEPS");
  app.add_option("--max-num-seqs", ec.max_num_seqs, "running requests")
      ->check(in_range<int32_t>(1, INT32_MAX))
      ->envname("FLASHSERVE_MAX_NUM_SEQS");
  app.add_option("--max-waiting", ec.max_waiting, "waiting queue limit (RESOURCE_EXHAUSTED past it)")
      ->check(in_range<int32_t>(1, INT32_MAX))
      ->envname("FLASHSERVE_MAX_WAITING");
  app.add_option("--grace-period", grace, "seconds to let running requests finish on SIGTERM")
      ->check(in_range(0.0, 86400.0))
      ->envname("FLASHSERVE_GRACE_PERIOD");
  app.add_option("--seed", seed, "synthetic weights' seed")
      ->check(in_range<uint64_t>(0, UINT64_MAX))
      ->envname("FLASHSERVE_SEED");
  std::string tokenizer_path;
  app.add_option("--tokenizer", tokenizer_path,
                 "tokenizer.json or .gguf to take the tokenizer (and chat template) from instead of the model's")
      ->envname("FLASHSERVE_TOKENIZER");
  // The OpenAI-compatible HTTP front, with /health and /metrics, on the same host as gRPC.
  so.http_port = 8000;
  app.add_option("--http-port", so.http_port,
                 "OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, /v1/models), /health, /metrics, "
                 "/tokenize and /detokenize on this port; HTTPS with --tls-cert/--tls-key (-1: off, 0: any)")
      ->check(in_range(-1, 65535))
      ->envname("FLASHSERVE_HTTP_PORT");
  app.add_option("--http-threads", so.http_threads,
                 "HTTP connections served at once (a streamed request holds one; as many more may wait; 0, the "
                 "default: one for each request the engine admits and 64 more, --max-num-seqs + --max-waiting + 64)")
      ->check(in_range(0, 65536))
      ->envname("FLASHSERVE_HTTP_THREADS");
  std::string served_model_name;
  app.add_option("--served-model-name", served_model_name,
                 "the model's name in the APIs (/v1/models, the requests' \"model\"; default: --model)")
      ->envname("FLASHSERVE_SERVED_MODEL_NAME");
  so.metrics_port = -1;
  app.add_option("--metrics-port", so.metrics_port,
                 "a second listener for GET /metrics alone (-1: off, the default: /metrics is on --http-port; 0: any)")
      ->check(in_range(-1, 65535))
      ->envname("FLASHSERVE_METRICS_PORT");
  // /metrics stays plain HTTP and open unless asked (Prometheus scrapes inside a cluster usually
  // are); on a port others can reach, turn on the token, TLS or both.
  app.add_flag("--metrics-tls", so.metrics_tls,
               "serve /metrics over HTTPS with --tls-cert/--tls-key (default: plain HTTP)")
      ->envname("FLASHSERVE_METRICS_TLS");
  app.add_flag("--metrics-require-token", so.metrics_require_token,
               "/metrics needs 'Authorization: Bearer <token>' with a token gRPC takes (--auth-token-file, "
               "FLASHSERVE_AUTH_TOKEN, --admin-token-file; default: open)")
      ->envname("FLASHSERVE_METRICS_REQUIRE_TOKEN");
  // A request needs at most the context length x 4 bytes plus its sampling parameters; a
  // bigger message is refused by gRPC (RESOURCE_EXHAUSTED) before it is parsed or queued (24
  // messages of 14 MiB used to take 1.2 GB). The flag raises (or lowers) it.
  int64_t max_receive_bytes = 0;
  app.add_option("--max-receive-bytes", max_receive_bytes,
                 "largest request message in bytes (default: the model's context length x 4 + 64 KiB)")
      ->check(in_range<int64_t>(1024, INT32_MAX))
      ->envname("FLASHSERVE_MAX_RECEIVE_BYTES");
  CLI11_PARSE(app, argc, argv);
  if (overlap_opt->count() == 0) ec.overlap_steps = device == "cuda";  // (the flag's default: the device's)
  if (device == "cuda" && batched_opt->count() == 0) ec.max_num_batched_tokens = kCudaBatchedTokens;
  if (device == "cuda" && prefill_opt->count() == 0) ec.max_prefill_tokens = kCudaPrefillTokens;
  ec.tpot_target_s = tpot_target_ms / 1000.0;
  if (device != "cuda" && utilization_opt->count() > 0) {
    spdlog::error("--gpu-memory-utilization is for --device cuda; on the CPU the KV cache is --num-blocks (default "
                  "1024) or --kv-cache-memory");
    return 1;
  }
  // The cache dtype: auto is the model's own; on CUDA bf16 or FP8.
  model::KvCacheOptions kv_options;
  {
    Status kst = model::parse_kv_cache_dtype(kv_cache_dtype, device == "cuda" ? DType::kBFloat16 : DType::kFloat32,
                                             &kv_options.dtype);
    if (kst.ok() && !kv_cache_scale.empty())
      kst = model::parse_kv_cache_scale(kv_cache_scale, &kv_options.k_scale, &kv_options.v_scale);
    if (kst.ok()) kst = kv_options.validate();
    if (kst.ok() && device == "cuda" && kv_options.dtype != DType::kBFloat16 && !is_fp8(kv_options.dtype))
      kst = unsupported("--kv-cache-dtype " + kv_cache_dtype +
                        ": the CUDA model's cache is bf16 or FP8 (--kv-cache-dtype auto, bf16, fp8_e4m3 or fp8_e5m2)");
    if (!kst.ok()) {
      spdlog::error("{}", kst.message());
      return 1;
    }
  }
  // The pool: --num-blocks (given, or by default on the CPU), else sized from memory by
  // --kv-cache-memory or (on CUDA, by default) --gpu-memory-utilization; kv_budget names the
  // choice in the log and in sizing errors.
  const bool kv_from_memory = kv_cache_memory > 0 || (device == "cuda" && num_blocks_opt->count() == 0);
  const std::string kv_budget = kv_cache_memory > 0 ? "--kv-cache-memory " + std::to_string(kv_cache_memory)
                                : kv_from_memory     ? fmt::format("--gpu-memory-utilization {}", gpu_memory_utilization)
                                : num_blocks_opt->count() > 0 ? "--num-blocks"
                                                              : "the default --num-blocks";
  so.max_receive_bytes = max_receive_bytes > 0 ? static_cast<int>(max_receive_bytes)
                                               : server::max_receive_bytes_for(peek_context_length(model));
  if (!auth_token_file.empty()) {
    std::vector<std::string> tokens;
    if (const Status st = read_token_file("--auth-token-file", auth_token_file, false, &tokens); !st.ok()) {
      spdlog::error("{}", st.message());
      return 1;
    }
    so.auth_token = tokens[0];  // "token 1"; the others "token 2"...
    so.extra_auth_tokens.assign(tokens.begin() + 1, tokens.end());
  }
  if (!admin_token_file.empty()) {
    std::vector<std::string> admin;
    if (const Status st = read_token_file("--admin-token-file", admin_token_file, true, &admin); !st.ok()) {
      spdlog::error("{}", st.message());
      return 1;
    }
    so.admin_token = admin[0];
    if (admin[0] == so.auth_token ||
        std::find(so.extra_auth_tokens.begin(), so.extra_auth_tokens.end(), admin[0]) != so.extra_auth_tokens.end()) {
      spdlog::error("--admin-token-file: the admin token is also a tenant token; give the admin its own");
      return 1;
    }
  }
  so.prefix_cache_isolation =
      isolation == "identity" ? server::PrefixCacheIsolation::kIdentity : server::PrefixCacheIsolation::kNone;
  if (so.prefix_cache_isolation == server::PrefixCacheIsolation::kIdentity && so.auth_token.empty())
    spdlog::warn("--prefix-cache-isolation identity without tokens: each connection is its own identity");

  // Listen first: while the model loads, health says NOT_SERVING and calls get UNAVAILABLE.
  so.model_name = served_model_name.empty() ? model : served_model_name;
  so.device = device;
  so.dtype = device == "cuda" ? "bf16" : "fp32";
  // Declared before the server, so destroyed after it: the server's threads (handlers, the
  // metrics scrape) reach both until it has stopped.
  std::unique_ptr<engine::Engine> eng;
  text::TextModel text_model;  // tokenizer and chat template: text in and out at the transports
  std::unique_ptr<server::GrpcServer> srv;
  // SIGTERM/SIGINT (blocked in every thread since before main): while starting, exit 0 at once.
  // Declared after the server, so its thread is joined before the server goes.
  server::TerminationSignals signals;
  // The engine comes after the listeners: their thread count (0) from its admission limits now.
  so.http_threads = server::http_threads_for(so, ec);
  if (so.http_port >= 0) {
    spdlog::info("http: {} connections served at once, as many queued", so.http_threads);
    raise_open_files_limit(2 * int64_t{so.http_threads} + 256);
  }
  if (const Status ls = server::GrpcServer::start(so, nullptr, &srv); !ls.ok()) {
    spdlog::error("listen: {}", ls.to_string());
    return 1;
  }
  spdlog::info("largest request message: {} bytes", so.max_receive_bytes);
  std::printf("listening on %s:%d\n", so.host.c_str(), srv->port());
  if (so.metrics_port >= 0)
    std::printf("metrics on %s://%s:%d/metrics\n", so.metrics_tls ? "https" : "http", so.host.c_str(), srv->metrics_port());
  if (so.http_port >= 0)
    std::printf("http on %s://%s:%d\n", so.tls_cert_file.empty() ? "http" : "https", so.host.c_str(), srv->http_port());
  std::fflush(stdout);

  model::LlamaConfig config;
  model::LlamaWeights weights;
  Status st;
  if (model.rfind("synthetic:", 0) == 0) {
    st = model::synthetic_preset(model.substr(10), &config);
    if (st.ok() && device == "cpu") st = model::synthetic_weights(config, seed, &weights);
  } else if (model::is_gguf_file(model)) {  // llama.cpp's file: the embedded default's format
    st = model::load_gguf_model(model, &config, &weights);
  } else {
    st = model::load_model_folder(model, &config, &weights);
  }
  if (!st.ok()) {
    spdlog::error("model {}: {}", model, st.to_string());
    return 1;
  }
  std::unique_ptr<model::Model> m;
  DeviceMemory memory;  // sized by --gpu-memory-utilization: what the device held then
  std::string scales;   // FP8: where the cache's scales come from
  if (device == "cpu") {
    if (kv_cache_memory > 0) {
      CacheSizing sized;
      st = size_cache(kv_budget, kv_cache_memory,
                      model::LlamaModel::kv_storage_shape(config, 0, ec.block_size, kv_options.dtype),
                      config.max_position_embeddings, &sized);
      ec.num_blocks = sized.num_blocks;
    }
    auto cpu = std::make_unique<model::LlamaModel>();
    if (st.ok())
      st = model::LlamaModel::create(config, std::move(weights), ec.num_blocks, ec.block_size, cpu.get(), kv_options);
    if (st.ok() && is_fp8(kv_options.dtype)) scales = cpu->kv_scales().describe();
    m = std::move(cpu);
  } else if (device == "cuda") {
#if FLASHSERVE_WITH_CUDA
    model::CudaModelOptions opt;
    opt.num_blocks = kv_from_memory ? 0 : ec.num_blocks;
    opt.kv_cache_bytes = kv_cache_memory;
    opt.gpu_memory_utilization = gpu_memory_utilization;
    opt.kv_budget_name = kv_budget;
    opt.block_size = ec.block_size;
    opt.max_tokens_per_step = ec.max_num_batched_tokens;
    opt.max_batch = ec.max_num_seqs;
    opt.kv = kv_options;
    std::unique_ptr<model::LlamaCudaModel> gpu;
    st = model::LlamaCudaModel::create(config, weights.embed.empty() ? nullptr : &weights, seed, opt, &gpu);
    if (st.ok()) {
      // The decode graphs of every batch capture size, before the first request (a capture
      // the first time a batch size comes would stall its step); FLASHSERVE_GRAPH_WARMUP=0 skips.
      const char* warm = std::getenv("FLASHSERVE_GRAPH_WARMUP");
      if (warm == nullptr || std::strcmp(warm, "0") != 0) {
        const auto t0 = std::chrono::steady_clock::now();
        int32_t captured = 0;
        st = gpu->warm_up_graphs(&captured);
        spdlog::info("decode graphs: {} captured in {:.2f} s", captured,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
    }
    if (st.ok()) {
      ec.num_blocks = gpu->kv_shape().num_blocks;
      memory = gpu->memory_at_sizing();
      if (is_fp8(kv_options.dtype)) scales = gpu->kv_scales().describe();
    }
    m = std::move(gpu);
#else
    st = unsupported("this build has no CUDA");
#endif
  } else {
    st = invalid_argument("--device must be cpu or cuda");
  }
  if (st.ok())
    spdlog::info("KV cache: {}, by {}{} ({} pages)", describe(cache_sizing(m->kv_shape())), kv_budget,
                 memory.total_bytes > 0 ? " of " + describe(memory) : "", dtype_name(m->kv_shape().dtype));
  if (st.ok() && !scales.empty()) spdlog::info("KV cache scales: {}", scales);
  if (st.ok()) st = engine::Engine::create(ec, std::move(m), &eng);
  so.model_name = served_model_name.empty() ? model : served_model_name;
  so.device = device;
  if (!st.ok()) {
    spdlog::error("startup: {}", st.to_string());
    return 1;
  }
  if (st.ok()) st = text::TextModel::load(model, tokenizer_path, &text_model);
  if (!st.ok()) {
    spdlog::error("tokenizer: {}", st.to_string());
    return 1;
  }
  if (text_model.has_tokenizer())
    spdlog::info("tokenizer: {}; chat template: {}", text_model.description(),
                 text_model.has_chat_template() ? text_model.chat_template_source() : "none");
  else
    spdlog::info("no tokenizer: token ids only");
  {  // which prefill budget the steps follow (issue 27)
    const std::string rest = fmt::format("the rest of --max-batched-tokens {}", ec.max_num_batched_tokens);
    const std::string limit =
        ec.max_prefill_tokens > 0 ? fmt::format("at most {} (--max-prefill-tokens)", ec.max_prefill_tokens) : rest;
    if (ec.tpot_target_s > 0)
      spdlog::info("prefill budget while decodes run: the most prompt tokens whose predicted forward time stays "
                   "<= {} ms (--tpot-target-ms, a step cost model fitted on the last {} steps), at least {}, {}; "
                   "steps without decodes: {}",
                   tpot_target_ms, engine::StepCostConfig{}.window, std::max(16, ec.block_size), limit, rest);
    else
      spdlog::info("prefill budget while decodes run: {}{}; steps without decodes: {}", limit,
                   ec.max_prefill_tokens > 0 ? "" : " (no --max-prefill-tokens, no --tpot-target-ms)", rest);
  }
  spdlog::info("steps: {}", ec.overlap_steps ? "overlapped (--overlap-steps: step n + 1 queued while step n runs)"
                                             : "one at a time (no --overlap-steps)");
  if (ec.overlap_steps && device != "cuda")
    spdlog::warn("--overlap-steps on the CPU gains nothing (its steps run in begin_step) and delays each token by a "
                 "step; it is for the GPU");
  srv->set_engine(eng.get(), &text_model);
  spdlog::info("flashserve serving {} on {} at {}:{}", model, device, so.host, srv->port());
  std::printf("ready\n");
  std::fflush(stdout);
  // A second signal ends the grace period: what runs is aborted, its streams get their final
  // message, and the process still exits 0.
  const int sig = signals.wait_for_signal([&srv] { srv->cut_drain_short(); });
  spdlog::info("signal {}: draining (grace period {} s)", sig, grace);
  srv->drain_and_stop(grace);
  srv->wait();  // joins every thread that can reach the engine
  srv.reset();
  spdlog::info("stopped");
  return 0;
}
