// flashserve_bench's gRPC backend: Generate streamed over one channel (HTTP/2 multiplexes every
// request), TTFT at the first response with token ids, an inter-token latency between each
// later one and the one before.
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <fstream>
#include <sstream>

#include "client/backend.h"
#include "client/grpc_connect.h"
#include "flashserve/v1/generation.grpc.pb.h"

namespace flashserve::client {

namespace {

namespace v1 = flashserve::v1;
using Clock = std::chrono::steady_clock;

class GrpcBackend final : public Backend {
 public:
  GrpcBackend(const GrpcBackendOptions& o, std::unique_ptr<v1::Generation::Stub> stub)
      : o_(o), stub_(std::move(stub)) {}

  bool vocab_size(int32_t* out, std::string* error) override {
    grpc::ClientContext ctx;
    start(&ctx, 30);
    v1::ModelInfo info;
    const grpc::Status st = stub_->GetModelInfo(&ctx, {}, &info);
    if (!st.ok()) {
      *error = "GetModelInfo: " + st.error_message();
      return false;
    }
    *out = info.vocab_size();
    return true;
  }

  bool tokenize(const std::string& text, std::vector<int32_t>* ids, std::string* error) override {
    grpc::ClientContext ctx;
    start(&ctx, 30);
    v1::TokenizeRequest tr;
    tr.set_text(text);
    tr.set_add_special_tokens(true);
    v1::TokenizeResponse resp;
    const grpc::Status st = stub_->Tokenize(&ctx, tr, &resp);
    if (!st.ok()) {
      *error = "Tokenize: " + st.error_message();
      return false;
    }
    ids->assign(resp.token_ids().begin(), resp.token_ids().end());
    return true;
  }

  bool prepare(BenchPrompt*, std::string*) override { return true; }

  RequestRecord generate(const BenchPrompt& p, bool ignore_eos) const override {
    RequestRecord r;
    r.prompt_len = static_cast<int32_t>(p.tokens.size());
    v1::GenerateRequest req;
    for (int32_t t : p.tokens) req.add_prompt_token_ids(t);
    req.mutable_sampling()->set_temperature(0.f);
    req.mutable_sampling()->set_max_tokens(p.output_len);
    req.mutable_sampling()->set_ignore_eos(ignore_eos);
    grpc::ClientContext ctx;
    start(&ctx, 0);
    const auto begin = Clock::now();
    auto reader = stub_->Generate(&ctx, req);
    v1::GenerateResponse resp;
    auto last = begin;
    while (reader->Read(&resp)) {
      if (resp.token_ids_size() == 0) continue;
      const auto now = Clock::now();
      if (r.output_len == 0) r.ttft_s = std::chrono::duration<double>(now - begin).count();
      else r.itl_s.push_back(std::chrono::duration<double>(now - last).count());
      last = now;
      r.output_len += resp.token_ids_size();
    }
    const grpc::Status st = reader->Finish();
    r.e2el_s = std::chrono::duration<double>(Clock::now() - begin).count();
    r.success = st.ok();
    r.error_space = st.ok() ? ErrorSpace::kNone : ErrorSpace::kGrpc;
    r.error_code = st.error_code();
    r.error = st.error_message();
    return r;
  }

  std::string describe() const override { return "gRPC " + o_.target; }

 private:
  void start(grpc::ClientContext* ctx, int deadline_s) const {
    if (!o_.token.empty()) ctx->AddMetadata("authorization", "Bearer " + o_.token);
    if (deadline_s > 0) ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(deadline_s));
  }

  GrpcBackendOptions o_;
  std::unique_ptr<v1::Generation::Stub> stub_;
};

}  // namespace

bool make_grpc_backend(const GrpcBackendOptions& o, std::unique_ptr<Backend>* out, std::string* error) {
  std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials();
  if (!o.tls_ca.empty()) {
    std::ifstream in(o.tls_ca);
    if (!in) {
      *error = "cannot read --tls-ca " + o.tls_ca;
      return false;
    }
    std::stringstream pem;
    pem << in.rdbuf();
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = pem.str();
    creds = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(16 << 20);
  auto channel = grpc::CreateCustomChannel(o.target, creds, args);
  // Connected before the first request: no request of the run is timed through a connection's
  // set-up, and a server that is not there is one clear error, not a run of them.
  if (!wait_connected(channel, o.target, o.connect_timeout_s, error)) return false;
  *out = std::make_unique<GrpcBackend>(o, v1::Generation::NewStub(channel));
  return true;
}

}  // namespace flashserve::client
