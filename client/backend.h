// How flashserve_bench talks to a server: one Backend per front, the same load and report over
// each. grpc: flashserve.v1.Generation's streamed Generate (--target host:port); openai and
// openai-chat: POST /v1/completions or /v1/chat/completions streamed as server-sent events
// (--base-url), the names of `vllm bench serve --backend`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/serve_stats.h"

namespace flashserve::client {

struct BenchPrompt {
  std::vector<int32_t> tokens;  // what the random and prefix datasets make, or a jsonl line's ids
  std::string text;             // openai-chat: the user message (set by Backend::prepare)
  int32_t output_len = 0;       // max_tokens
};

class Backend {
 public:
  virtual ~Backend() = default;
  // The model's vocabulary size (random prompts draw ids below it); false with a message.
  virtual bool vocab_size(int32_t* out, std::string* error) = 0;
  // The server's tokenizer, special tokens added (a jsonl line's text prompt).
  virtual bool tokenize(const std::string& text, std::vector<int32_t>* ids, std::string* error) = 0;
  // Before the run, untimed: what this backend sends besides the ids (openai-chat: the ids'
  // text, from the server's detokenizer, for a prompt that has none).
  virtual bool prepare(BenchPrompt* prompt, std::string* error) = 0;
  // One request, greedy (temperature 0), max_tokens = output_len; from any thread. A failure
  // (refused connection, non-200, a bad stream) is a record with success false and its message.
  virtual RequestRecord generate(const BenchPrompt& prompt, bool ignore_eos) const = 0;
  // For the start line: what requests go to.
  virtual std::string describe() const = 0;
};

struct GrpcBackendOptions {
  std::string target;  // host:port
  std::string token;   // "Bearer <token>" when not empty
  std::string tls_ca;  // PEM file: TLS on
  double connect_timeout_s = 10;  // the channel is connected before the run, or the run fails
};
bool make_grpc_backend(const GrpcBackendOptions& o, std::unique_ptr<Backend>* out, std::string* error);

struct OpenAiBackendOptions {
  bool chat = false;
  std::string base_url;  // http(s)://host:port[/prefix]
  std::string endpoint;  // empty: /v1/completions, or /v1/chat/completions with chat
  std::string model;     // the request's "model"; empty: the first of GET /v1/models
  std::string token;
  std::string tls_ca;    // PEM file to trust for an https base URL
};
// Checks the URL and asks for the model name when it is not given.
bool make_openai_backend(const OpenAiBackendOptions& o, std::unique_ptr<Backend>* out, std::string* error);

}  // namespace flashserve::client
