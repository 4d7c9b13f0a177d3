#include "server/grpc/server.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/support/server_interceptor.h>
#include <spdlog/spdlog.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "flashserve/v1/generation.grpc.pb.h"
#include "server/grpc/cancel_watch.h"
#include "server/generation.h"
#include "server/grpc/metrics.h"
#include "server/http/openai.h"

namespace flashserve::server {

namespace v1 = ::flashserve::v1;

bool equal_in_constant_time(std::string_view a, std::string_view b) {
  // Every byte of the longer one is read and no branch depends on their contents: the time
  // tells at most the lengths (a token's length is no secret worth the branch).
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const auto x = static_cast<unsigned char>(i < a.size() ? a[i] : 0);
    const auto y = static_cast<unsigned char>(i < b.size() ? b[i] : 0);
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

int grpc_code_of(const Status& st) {
  switch (st.code()) {
    case StatusCode::kOk: return grpc::StatusCode::OK;
    case StatusCode::kInvalidArgument:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnsupported: return grpc::StatusCode::INVALID_ARGUMENT;
    case StatusCode::kResourceExhausted: return grpc::StatusCode::RESOURCE_EXHAUSTED;
    case StatusCode::kUnavailable: return grpc::StatusCode::UNAVAILABLE;
    case StatusCode::kInternal: return grpc::StatusCode::INTERNAL;
  }
  return grpc::StatusCode::INTERNAL;
}

namespace {

grpc::Status to_grpc(const Status& st) {
  return grpc::Status(static_cast<grpc::StatusCode>(grpc_code_of(st)), st.message());
}

v1::FinishReason to_proto(engine::FinishReason r) {
  switch (r) {
    case engine::FinishReason::kEos: return v1::FINISH_REASON_EOS;
    case engine::FinishReason::kStop: return v1::FINISH_REASON_STOP;
    case engine::FinishReason::kLength: return v1::FINISH_REASON_LENGTH;
    case engine::FinishReason::kAborted: return v1::FINISH_REASON_ABORTED;
    default: return v1::FINISH_REASON_UNSPECIFIED;
  }
}

grpc::Status failed_precondition(const std::string& m) {
  return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, m);
}

std::vector<ChatMessage> chat_of(const google::protobuf::RepeatedPtrField<v1::ChatMessage>& in) {
  std::vector<ChatMessage> out;
  out.reserve(in.size());
  for (const auto& m : in) out.push_back({m.role(), m.content()});
  return out;
}

// The prompt ids of a request: exactly one of token ids, text, chat messages.
grpc::Status prompt_of(const text::TextModel* tm, const v1::GenerateRequest& req, std::vector<int32_t>* ids) {
  const int given = (req.prompt_token_ids_size() > 0) + !req.prompt_text().empty() + (req.messages_size() > 0);
  if (given == 0) return to_grpc(invalid_argument("the request has no prompt: give prompt_token_ids, prompt_text or messages"));
  if (given > 1) return to_grpc(invalid_argument("give exactly one of prompt_token_ids, prompt_text and messages"));
  if (req.prompt_token_ids_size() > 0) {
    ids->assign(req.prompt_token_ids().begin(), req.prompt_token_ids().end());
    return grpc::Status::OK;
  }
  if (tm == nullptr || !tm->has_tokenizer())
    return failed_precondition("text prompts need a tokenizer, and this model has none: send prompt_token_ids");
  if (!req.prompt_text().empty()) return to_grpc(tm->encode_text(req.prompt_text(), true, ids));
  if (!tm->has_chat_template())
    return failed_precondition("chat messages need a chat template, and this model has none: send prompt_text");
  std::string prompt;
  return to_grpc(tm->encode_chat(chat_of(req.messages()), true, &prompt, ids));
}

// A client's request id goes into every log line of the request and every response message:
// at most kMaxRequestIdBytes of printable ASCII (a 1 MiB id was taken, logged twice a request
// and echoed back in status messages past what clients accept). The message does not echo it.
constexpr size_t kMaxRequestIdBytes = 128;

grpc::Status check_request_id(const std::string& id) {
  if (id.size() > kMaxRequestIdBytes)
    return to_grpc(invalid_argument("request_id is " + std::to_string(id.size()) + " bytes; at most " +
                                    std::to_string(kMaxRequestIdBytes) + " are allowed"));
  for (size_t i = 0; i < id.size(); ++i)
    if (static_cast<unsigned char>(id[i]) < 0x20 || static_cast<unsigned char>(id[i]) > 0x7e)
      return to_grpc(invalid_argument("request_id must be printable ASCII; byte " + std::to_string(i) + " is not"));
  return grpc::Status::OK;
}

// A TLS file, named by its flag in every error: which file, and why.
Status read_file(const char* flag, const std::string& path, std::string* out) {
  errno = 0;
  std::ifstream f(path, std::ios::binary);
  if (!f) return invalid_argument(std::string(flag) + ": cannot read " + path + ": " + std::strerror(errno ? errno : EIO));
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return invalid_argument(std::string(flag) + ": cannot read " + path + ": " + std::strerror(errno ? errno : EIO));
  *out = ss.str();
  if (out->empty()) return invalid_argument(std::string(flag) + ": " + path + " is empty");
  return Status::Ok();
}

// OpenSSL's reason for the last failure (its error queue emptied), or `fallback`.
std::string openssl_reason(const char* fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}

// The certificate and key read and checked before gRPC sees them: gRPC only says it cannot
// listen when the key does not match the certificate or either is not PEM. Each error names
// the flag, the file and the reason.
Status load_tls_pair(const ServerOptions& opt, grpc::SslServerCredentialsOptions::PemKeyCertPair* pair) {
  if (opt.tls_cert_file.empty() || opt.tls_key_file.empty())
    return invalid_argument(opt.tls_cert_file.empty() ? "--tls-key " + opt.tls_key_file + " is set but --tls-cert is not: TLS needs both"
                                                      : "--tls-cert " + opt.tls_cert_file + " is set but --tls-key is not: TLS needs both");
  FS_RETURN_IF_ERROR(read_file("--tls-cert", opt.tls_cert_file, &pair->cert_chain));
  FS_RETURN_IF_ERROR(read_file("--tls-key", opt.tls_key_file, &pair->private_key));
  ERR_clear_error();
  std::unique_ptr<BIO, decltype(&BIO_free)> cb(BIO_new_mem_buf(pair->cert_chain.data(), static_cast<int>(pair->cert_chain.size())), BIO_free);
  std::unique_ptr<X509, decltype(&X509_free)> cert(cb ? PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr) : nullptr, X509_free);
  if (!cert)
    return invalid_argument("--tls-cert: " + opt.tls_cert_file + " holds no PEM certificate (" +
                            openssl_reason("no BEGIN CERTIFICATE block") + ")");
  std::unique_ptr<BIO, decltype(&BIO_free)> kb(BIO_new_mem_buf(pair->private_key.data(), static_cast<int>(pair->private_key.size())), BIO_free);
  // No passphrase callback: an encrypted key fails here rather than prompting.
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      kb ? PEM_read_bio_PrivateKey(kb.get(), nullptr, [](char*, int, int, void*) { return 0; }, nullptr) : nullptr, EVP_PKEY_free);
  if (!key)
    return invalid_argument("--tls-key: " + opt.tls_key_file + " holds no unencrypted PEM private key (" +
                            openssl_reason("no BEGIN PRIVATE KEY block") + ")");
  if (X509_check_private_key(cert.get(), key.get()) != 1) {
    ERR_clear_error();
    return invalid_argument("--tls-key: the key in " + opt.tls_key_file + " does not match the certificate in " +
                            opt.tls_cert_file);
  }
  return Status::Ok();
}

// Every token the options name, in order: "token 1" is auth_token.
std::vector<std::string> tokens_of(const ServerOptions& o) {
  std::vector<std::string> t;
  if (!o.auth_token.empty()) t.push_back(o.auth_token);
  t.insert(t.end(), o.extra_auth_tokens.begin(), o.extra_auth_tokens.end());
  return t;
}

Credentials credentials_of(const ServerOptions& o) { return Credentials(tokens_of(o), o.admin_token); }

// A Write with the watcher kept off the call meanwhile (CancelWatch::Watch::in_grpc).
bool write(CancelWatch::Watch* watch, grpc::ServerWriter<v1::GenerateResponse>* writer, const v1::GenerateResponse& out) {
  std::lock_guard<std::mutex> in_grpc(watch->in_grpc());
  return writer->Write(out);
}

}  // namespace

class GrpcServer::Service final : public v1::Generation::Service {
 public:
  Service(engine::Engine* e, const ServerOptions& o, const CacheSalter* salter, Metrics* m)
      : engine_(e), opt_(o), credentials_(credentials_of(o)), salter_(*salter), metrics_(m) {}
  std::atomic<engine::Engine*> engine_;
  std::atomic<const text::TextModel*> text_{nullptr};
  std::atomic<bool> draining{false};

  // Request ids live in the caller's namespace (its owner, server/grpc/caller.h): the engine keys
  // a request by (owner, id), so nobody can take or abort another caller's id; the id the client
  // sent (or the random one assigned) is what responses and logs show.
  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateResponse>* writer) override {
    Caller caller;
    if (auto st = authorize(ctx, &caller); !st.ok()) return st;
    engine::Engine* engine = engine_.load();
    if (engine == nullptr) return loading();
    if (draining) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is draining");
    if (grpc::Status st = check_request_id(req->request_id()); !st.ok()) return st;
    const text::TextModel* tm = text_.load();
    engine::GenerateRequest r;
    if (grpc::Status st = prompt_of(tm, *req, &r.prompt); !st.ok()) return st;
    r.request_id = req->request_id().empty() ? random_request_id() : req->request_id();
    r.owner = caller.owner;
    const auto& s = req->sampling();
    r.sampling.temperature = s.temperature();
    r.sampling.top_k = s.top_k();
    r.sampling.top_p = s.top_p() == 0.f ? 1.f : s.top_p();
    r.sampling.min_p = s.min_p();
    if (s.has_seed()) r.sampling.seed = s.seed();
    r.sampling.stop_token_ids.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
    r.sampling.max_tokens = s.max_tokens() == 0 ? 16 : s.max_tokens();
    r.sampling.min_tokens = s.min_tokens();
    r.sampling.ignore_eos = s.ignore_eos();
    r.cache_salt = salter_.salt(caller.owner, req->cache_salt());
    // Text out: with a tokenizer every chunk carries its text; stop strings end the request.
    GenerationRequest g{std::move(r), std::vector<std::string>(s.stop().begin(), s.stop().end()),
                        !s.include_special_tokens()};
    if (!g.stop.empty() && (tm == nullptr || !tm->has_tokenizer()))
      return failed_precondition("stop strings need a tokenizer, and this model has none: use stop_token_ids");
    std::unique_ptr<Generation> gen;
    if (const Status st = Generation::start(engine, tm, metrics_, std::move(g), &gen); !st.ok()) return to_grpc(st);
    const std::string& id = gen->request_id();
    // The client going away (cancel, deadline, lost connection) cancels the engine request: the
    // watcher notices it (gRPC tells only when asked), or a failed Write does.
    const std::unique_ptr<CancelWatch::Watch> watch = cancel_watch_.watch(ctx, [g = gen.get()] { g->cancel(); });
    bool write_failed = false;
    auto cancelled = [&] { return write_failed || watch->cancelled(); };
    GenerationChunk c;
    for (;;) {
      if (!gen->next(&c, -1))  // cannot happen: the final chunk returns below
        return to_grpc(internal_error("request " + id + ": the stream ended without a final event"));
      v1::GenerateResponse out;
      out.set_request_id(id);
      out.set_text(std::move(c.text));
      for (int32_t t : c.tokens) out.add_token_ids(t);
      if (c.finished) {
        out.set_finished(true);
        out.set_finish_reason(c.stopped_by_text ? v1::FINISH_REASON_STOP : to_proto(c.reason));
        out.mutable_usage()->set_prompt_tokens(c.prompt_tokens);
        out.mutable_usage()->set_completion_tokens(c.completion_tokens);
        out.mutable_usage()->set_cached_tokens(c.cached_tokens);  // 0 unless the engine's final event said
        out.mutable_timings()->set_time_to_first_token_s(c.time_to_first_token_s);
        out.mutable_timings()->set_elapsed_s(c.elapsed_s);
      }
      if (!cancelled() && !write(watch.get(), writer, out)) {
        write_failed = true;
        gen->cancel();
      }
      if (c.finished) {
        if (c.reason == engine::FinishReason::kError) return to_grpc(c.error);
        if (cancelled()) return grpc::Status(grpc::StatusCode::CANCELLED, "the request was cancelled");
        return grpc::Status::OK;
      }
    }
  }

  // Aborts the caller's own requests of these ids: another owner's id counts as unknown (not
  // aborted, no error), so Abort tells nobody which ids others use. The admin token aborts the id
  // in every owner's namespace.
  grpc::Status Abort(grpc::ServerContext* ctx, const v1::AbortRequest* req, v1::AbortResponse* resp) override {
    Caller caller;
    if (auto st = authorize(ctx, &caller); !st.ok()) return st;
    engine::Engine* engine = engine_.load();
    if (engine == nullptr) return loading();
    int n = 0;
    for (const auto& id : req->request_ids())
      n += caller.admin ? engine->cancel_in_every_namespace(id) : (engine->cancel(id, caller.owner).ok() ? 1 : 0);
    if (caller.admin) spdlog::info("admin abort: {} requests", n);
    resp->set_aborted(n);
    return grpc::Status::OK;
  }

  grpc::Status GetModelInfo(grpc::ServerContext* ctx, const v1::GetModelInfoRequest*, v1::ModelInfo* info) override {
    if (auto st = authorize(ctx); !st.ok()) return st;
    engine::Engine* engine = engine_.load();
    if (engine == nullptr) return loading();
    const auto& c = engine->model_config();
    info->set_name(opt_.model_name);
    info->set_vocab_size(c.vocab_size);
    info->set_max_context(c.max_position_embeddings);
    info->set_block_size(engine->config().block_size);
    info->set_dtype(opt_.dtype);
    info->set_kv_cache_dtype(dtype_name(engine->kv_shape().dtype));
    info->set_device(opt_.device);
    for (int32_t e : c.eos_token_ids) info->add_eos_token_ids(e);
    if (const text::TextModel* tm = text_.load(); tm != nullptr && tm->has_tokenizer()) {
      info->set_tokenizer(tm->description());
      if (tm->has_chat_template()) {
        info->set_chat_template(tm->tokenizer().chat_template());
        info->set_chat_template_source(tm->chat_template_source());
      }
    }
    return grpc::Status::OK;
  }

  grpc::Status Tokenize(grpc::ServerContext* ctx, const v1::TokenizeRequest* req, v1::TokenizeResponse* resp) override {
    if (auto st = authorize(ctx); !st.ok()) return st;
    const text::TextModel* tm = text_.load();
    if (tm == nullptr || !tm->has_tokenizer()) return failed_precondition("this model has no tokenizer");
    if (req->text().empty() == (req->messages_size() == 0))
      return to_grpc(invalid_argument("give exactly one of text and messages"));
    std::vector<int32_t> ids;
    if (!req->text().empty()) {
      if (const Status st = tm->encode_text(req->text(), req->add_special_tokens(), &ids); !st.ok()) return to_grpc(st);
    } else {
      if (!tm->has_chat_template()) return failed_precondition("this model has no chat template");
      std::string prompt;
      const Status st = tm->encode_chat(chat_of(req->messages()), req->add_generation_prompt(), &prompt, &ids);
      if (!st.ok()) return to_grpc(st);
      resp->set_prompt(prompt);
    }
    for (int32_t t : ids) resp->add_token_ids(t);
    return grpc::Status::OK;
  }

  grpc::Status Detokenize(grpc::ServerContext* ctx, const v1::DetokenizeRequest* req,
                          v1::DetokenizeResponse* resp) override {
    if (auto st = authorize(ctx); !st.ok()) return st;
    const text::TextModel* tm = text_.load();
    if (tm == nullptr || !tm->has_tokenizer()) return failed_precondition("this model has no tokenizer");
    std::vector<int32_t> ids(req->token_ids().begin(), req->token_ids().end());
    std::string out;
    if (const Status st = tm->tokenizer().decode(ids, req->skip_special_tokens(), &out); !st.ok()) return to_grpc(st);
    resp->set_text(std::move(out));
    return grpc::Status::OK;
  }

  grpc::Status GetServerInfo(grpc::ServerContext* ctx, const v1::GetServerInfoRequest*, v1::ServerInfo* info) override {
    if (auto st = authorize(ctx); !st.ok()) return st;
    engine::Engine* engine = engine_.load();
    if (engine == nullptr) return loading();
    const engine::EngineStats s = engine->stats();
    info->set_running_requests(s.running);
    info->set_waiting_requests(s.waiting);
    info->set_kv_cache_usage(s.kv_usage);
    info->set_prefix_cache_hit_rate(s.prefix_queries ? static_cast<double>(s.prefix_hits) / s.prefix_queries : 0.0);
    info->set_preemptions(s.preemptions);
    info->set_prompt_tokens(s.prompt_tokens);
    info->set_generation_tokens(s.generation_tokens);
    return grpc::Status::OK;
  }

 private:
  // The bearer token's check, and who the caller is (its token, the admin token, or without
  // tokens its connection).
  grpc::Status authorize(grpc::ServerContext* ctx, Caller* caller = nullptr) const {
    const auto& md = ctx->client_metadata();
    auto it = md.find("authorization");
    std::string_view header;
    if (it != md.end()) header = std::string_view(it->second.data(), it->second.size());
    Caller local;
    if (!credentials_.identify(it != md.end() ? &header : nullptr, ctx->peer(), caller ? caller : &local))
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "a valid bearer token is required");
    return grpc::Status::OK;
  }

  static grpc::Status loading() { return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the model is loading"); }

  ServerOptions opt_;
  const Credentials credentials_;
  const CacheSalter& salter_;
  Metrics* metrics_;
  CancelWatch cancel_watch_;  // for Generate's streams
};

// A request that does not parse as its protobuf type (random bytes, an overlong varint, a
// truncated field, bad UTF-8 in a string) never reaches a handler: gRPC sends INTERNAL with an
// empty message for it. A client needs INVALID_ARGUMENT and a reason, so this interceptor notes
// the failed parse of a one-message request (its received message is null) and rewrites the
// INTERNAL status that follows.
class ParseErrorInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ParseErrorInterceptor(bool one_request) : one_request_(one_request) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using grpc::experimental::InterceptionHookPoints;
    if (one_request_ && m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        m->GetRecvMessage() == nullptr)
      parse_failed_ = true;
    if (parse_failed_ && m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        m->GetSendStatus().error_code() == grpc::StatusCode::INTERNAL)
      m->ModifySendStatus(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "could not parse request"));
    m->Proceed();
  }

 private:
  bool one_request_;  // unary or server streaming: a null message can only be a failed parse
  bool parse_failed_ = false;
};

class ParseErrorInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    using Type = grpc::experimental::ServerRpcInfo::Type;
    return new ParseErrorInterceptor(info->type() == Type::UNARY || info->type() == Type::SERVER_STREAMING);
  }
};

// Server reflection follows the bearer token (issue 24, point 13): it describes every service
// and message, so a client without the token learns nothing from it unless open_reflection.
// The reflection service is grpc's own (its class is not public), so the check is here: every
// message it would send is replaced by an error_response (UNAUTHENTICATED, the same message as
// Generate's) and the final status by UNAUTHENTICATED. Health stays open for probes.
class ReflectionAuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ReflectionAuthInterceptor(const Credentials* credentials) : credentials_(credentials) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* m) override {
    using grpc::experimental::InterceptionHookPoints;
    if (m->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      const auto* md = m->GetRecvInitialMetadata();
      auto it = md->find("authorization");
      std::string_view header;
      if (it != md->end()) header = std::string_view(it->second.data(), it->second.size());
      Caller caller;
      authorized_ = credentials_->identify(it != md->end() ? &header : nullptr, {}, &caller);
    }
    if (!authorized_ && m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      // ServerReflectionResponse { error_response (7) { error_code (1): 16, error_message (2) } }
      const std::string text = kUnauthenticated;
      std::string inner = std::string("\x08\x10\x12", 3) + static_cast<char>(text.size()) + text;
      const std::string bytes = std::string("\x3a", 1) + static_cast<char>(inner.size()) + inner;
      grpc::Slice slice(bytes);
      *m->GetSerializedSendMessage() = grpc::ByteBuffer(&slice, 1);
    }
    if (!authorized_ && m->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS))
      m->ModifySendStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kUnauthenticated));
    m->Proceed();
  }
  static constexpr const char* kUnauthenticated = "a valid bearer token is required";

 private:
  const Credentials* credentials_;  // owned by the factory
  bool authorized_ = true;       // until the metadata says otherwise
};

class ReflectionAuthInterceptorFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ReflectionAuthInterceptorFactory(Credentials credentials) : credentials_(std::move(credentials)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(grpc::experimental::ServerRpcInfo* info) override {
    const char* method = info->method();
    if (method == nullptr || std::string_view(method).rfind("/grpc.reflection.", 0) != 0) return nullptr;
    return new ReflectionAuthInterceptor(&credentials_);
  }

 private:
  const Credentials credentials_;
};

// grpc.health.v1: the overall status ("") and flashserve.v1.Generation's, which load balancers
// and Kubernetes readiness probes ask for by name.
static void set_health(grpc::Server* server, bool serving) {
  grpc::HealthCheckServiceInterface* h = server->GetHealthCheckService();
  h->SetServingStatus(v1::Generation::service_full_name(), serving);
  h->SetServingStatus(serving);
}

int http_threads_for(const ServerOptions& o, const engine::EngineConfig& ec) {
  if (o.http_threads > 0) return o.http_threads;
  return static_cast<int>(std::min<int64_t>(int64_t{ec.max_num_seqs} + ec.max_waiting + 64, 8192));
}

Status GrpcServer::start(const ServerOptions& opt, engine::Engine* engine, std::unique_ptr<GrpcServer>* out) {
  std::unique_ptr<GrpcServer> s(new GrpcServer());
  s->engine_ = engine;
  s->metrics_ = std::make_unique<Metrics>(engine);
  if (opt.metrics_port >= 0) FS_RETURN_IF_ERROR(s->metrics_->serve(opt, credentials_of(opt)));
  s->salter_ = std::make_unique<CacheSalter>(opt.prefix_cache_isolation);
  if (opt.http_port >= 0) {
    OpenAiOptions ho;
    ho.http.host = opt.host;
    ho.http.port = opt.http_port;
    ho.http.tls_cert_file = opt.tls_cert_file;
    ho.http.tls_key_file = opt.tls_key_file;
    // A streamed request holds a thread from its headers to its last chunk; as many connections
    // again wait for one, 503 past them. (The engine may come later, while the front already
    // answers 503: then the default config's limits.)
    ho.http.threads = http_threads_for(opt, engine ? engine->config() : engine::EngineConfig{});
    ho.http.max_queued = ho.http.threads;
    ho.http.max_body_bytes =
        opt.http_max_body_bytes > 0 ? opt.http_max_body_bytes : 2 * static_cast<size_t>(opt.max_receive_bytes);
    ho.model_name = opt.model_name;
    ho.metrics_require_token = opt.metrics_require_token;
    FS_RETURN_IF_ERROR(OpenAiFront::start(ho, credentials_of(opt), s->salter_.get(), s->metrics_.get(), &s->http_));
    s->http_->set_engine(engine, nullptr);
  }
  s->service_ = std::make_unique<Service>(engine, opt, s->salter_.get(), s->metrics_.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder b;
  std::shared_ptr<grpc::ServerCredentials> creds = grpc::InsecureServerCredentials();
  if (!opt.tls_cert_file.empty() || !opt.tls_key_file.empty()) {
    grpc::SslServerCredentialsOptions ssl;
    grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
    FS_RETURN_IF_ERROR(load_tls_pair(opt, &pair));
    ssl.pem_key_cert_pairs.push_back(pair);
    creds = grpc::SslServerCredentials(ssl);
  }
  // No SO_REUSEPORT (gRPC's default on Linux): with it a second server on a port in use binds too
  // and the kernel splits the connections between the two, and two servers asking for port 0 at
  // once may be given the same one. Without it a port in use fails to bind (below).
  b.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  b.AddListeningPort(opt.host + ":" + std::to_string(opt.port), creds, &s->port_);
  b.RegisterService(s->service_.get());
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<ParseErrorInterceptorFactory>());
  if (credentials_of(opt).tokens_required() && !opt.open_reflection)
    interceptors.push_back(std::make_unique<ReflectionAuthInterceptorFactory>(credentials_of(opt)));
  b.experimental().SetInterceptorCreators(std::move(interceptors));
  b.SetMaxReceiveMessageSize(opt.max_receive_bytes);
  b.SetMaxSendMessageSize(opt.max_message_bytes);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, 30000);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  b.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  b.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  // Proxies (Envoy) and clients may ping idle connections every 30 s without being cut off.
  b.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 30000);
  s->server_ = b.BuildAndStart();
  if (!s->server_ || s->port_ == 0)
    return unsupported("server: cannot listen on " + opt.host + ":" + std::to_string(opt.port));
  set_health(s->server_.get(), engine != nullptr);  // NOT_SERVING while loading
  *out = std::move(s);
  return Status::Ok();
}

void GrpcServer::set_engine(engine::Engine* engine, const text::TextModel* text) {
  service_->text_ = text;  // before the engine: a request that sees the engine sees the text model
  engine_ = engine;
  metrics_->set_engine(engine);
  service_->engine_ = engine;
  if (http_) http_->set_engine(engine, text);
  set_health(server_.get(), engine != nullptr);
}

GrpcServer::~GrpcServer() {
  if (server_) server_->Shutdown(std::chrono::system_clock::now());
  if (http_) http_->stop();
  if (metrics_) metrics_->stop();
}

int GrpcServer::metrics_port() const { return metrics_ ? metrics_->port() : 0; }
int GrpcServer::http_port() const { return http_ ? http_->port() : 0; }

void GrpcServer::drain_and_stop(double grace_s) {
  service_->draining = true;
  if (http_) http_->set_draining();
  set_health(server_.get(), false);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (engine_ != nullptr && !cut_drain_short_ && std::chrono::steady_clock::now() < deadline) {
    const engine::EngineStats s = engine_->stats();
    if (s.running + s.waiting == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (engine_ != nullptr) engine_->shutdown();  // aborts what is left; their streams end
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
}

void GrpcServer::wait() {
  server_->Wait();    // every handler has returned
  if (http_) http_->stop();  // the HTTP front's handlers too
  metrics_->stop();   // and the scrape thread, which reads the engine's stats, is joined
}

}  // namespace flashserve::server
