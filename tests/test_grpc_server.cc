// The gRPC server over loopback (in process, a real port): streaming order and completeness,
// many concurrent streams, cancel and deadlines free the pool, every status code, the bearer
// token, draining.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include <grpcpp/generic/generic_stub.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "flashserve/v1/generation.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "server/grpc/metrics.h"
#include "server/grpc/server.h"
#include "server/model/llama.h"
#include "tests/grpc_support.h"
#include "tests/model_support.h"

namespace flashserve::server {
namespace {

namespace v1 = ::flashserve::v1;

struct Fixture {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<v1::Generation::Stub> stub;
};

Fixture start(engine::EngineConfig ec = {}, const std::string& token = "", const std::string& cert = "",
              const std::string& key = "", ServerOptions so = {}, const model::KvCacheOptions& kv = {}) {
  Fixture f;
  if (ec.num_blocks == 256) ec.num_blocks = 512;
  auto m = test::tiny_model(7, ec.num_blocks, ec.block_size, kv);
  EXPECT_TRUE(engine::Engine::create(ec, std::move(m), &f.engine).ok());
  so.port = 0;
  so.metrics_port = 0;
  so.auth_token = token;
  so.tls_cert_file = cert;
  so.tls_key_file = key;
  const Status st = GrpcServer::start(so, f.engine.get(), &f.server);
  EXPECT_TRUE(st.ok()) << st.to_string();
  // Over TLS this plain-text stub is the one that must fail (GrpcServer.Tls): not waited for.
  const std::string target = "127.0.0.1:" + std::to_string(f.server->port());
  f.stub = v1::Generation::NewStub(cert.empty() ? test::local_channel(f.server->port())
                                                : grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
  return f;
}

v1::GenerateRequest request(std::vector<int32_t> prompt, int max_tokens) {
  v1::GenerateRequest r;
  for (int32_t t : prompt) r.add_prompt_token_ids(t);
  r.mutable_sampling()->set_temperature(0.f);
  r.mutable_sampling()->set_max_tokens(max_tokens);
  r.mutable_sampling()->set_ignore_eos(true);
  return r;
}

struct Result {
  std::vector<int32_t> tokens;
  v1::GenerateResponse last;
  grpc::Status status;
  int messages = 0;
};

Result generate(v1::Generation::Stub& stub, const v1::GenerateRequest& req, grpc::ClientContext* ctx = nullptr) {
  grpc::ClientContext local;
  if (ctx == nullptr) ctx = &local;
  auto reader = stub.Generate(ctx, req);
  Result r;
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    r.tokens.insert(r.tokens.end(), resp.token_ids().begin(), resp.token_ids().end());
    ++r.messages;
    if (resp.finished()) r.last = resp;
  }
  r.status = reader->Finish();
  return r;
}

double kv_usage(v1::Generation::Stub& stub) {
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  EXPECT_TRUE(stub.GetServerInfo(&ctx, {}, &info).ok());
  return info.kv_cache_usage();
}

// The overall status (service ""), or one service's: the Helm chart's readiness probe and Envoy's
// health check ask for flashserve.v1.Generation.
int health(const std::shared_ptr<grpc::Channel>& channel, const std::string& service = "") {
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext ctx;
  grpc::health::v1::HealthCheckRequest req;
  req.set_service(service);
  grpc::health::v1::HealthCheckResponse resp;
  const grpc::Status st = stub->Check(&ctx, req, &resp);
  return st.ok() ? static_cast<int>(resp.status()) : -1;
}

// Polls `done` every 5 ms until it holds or 10 s pass; its last answer. For a state another
// thread reaches: a fixed sleep fails on a loaded 2-core machine.
template <typename F>
bool eventually(F done) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > until) return done();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

std::vector<int32_t> reference_greedy(const std::vector<int32_t>& prompt, int n) {
  return test::reference_greedy(7, prompt, n);
}

TEST(GrpcServer, StreamsEveryTokenInOrder) {
  Fixture f = start();
  const std::vector<int32_t> prompt = {5, 17, 300, 42, 9, 11, 250};
  const Result r = generate(*f.stub, request(prompt, 20));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens, reference_greedy(prompt, 20));
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.last.usage().completion_tokens(), 20);
  EXPECT_EQ(r.last.usage().prompt_tokens(), 7);
  EXPECT_GE(r.messages, 20);
  grpc::ClientContext ctx;
  v1::ModelInfo mi;
  ASSERT_TRUE(f.stub->GetModelInfo(&ctx, {}, &mi).ok());
  EXPECT_EQ(mi.vocab_size(), 512);
  EXPECT_EQ(mi.dtype(), "fp32");
  EXPECT_EQ(mi.kv_cache_dtype(), "fp32");
}

TEST(GrpcServer, HundredsOfConcurrentStreams) {
  Fixture f = start();
  constexpr int kStreams = 200;
  std::vector<Result> results(kStreams);
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i)
    threads.emplace_back([&, i] { results[i] = generate(*f.stub, request({1 + i % 400, 2, 3 + i % 7}, 8)); });
  for (auto& t : threads) t.join();
  for (int i = 0; i < kStreams; ++i) {
    ASSERT_TRUE(results[i].status.ok()) << i << ": " << results[i].status.error_message();
    ASSERT_EQ(results[i].tokens.size(), 8u) << i;
  }
  EXPECT_NEAR(kv_usage(*f.stub), 0.0, 1e-12);
}

TEST(GrpcServer, CancelAndDeadlinesFreeThePool) {
  Fixture f = start();
  {  // the client cancels mid-stream
    grpc::ClientContext ctx;
    auto reader = f.stub->Generate(&ctx, request({1, 2, 3, 4}, 3000));
    v1::GenerateResponse resp;
    ASSERT_TRUE(reader->Read(&resp));
    ctx.TryCancel();
    while (reader->Read(&resp)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  {  // a deadline
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(150));
    const Result r = generate(*f.stub, request({7, 8, 9}, 3000), &ctx);
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  for (int i = 0; i < 200 && kv_usage(*f.stub) > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_NEAR(kv_usage(*f.stub), 0.0, 1e-12) << "an abandoned request kept its blocks";
}

// A request still waiting in the queue writes nothing, so no failed Write tells its handler that
// the client went away, and the handler sleeps on its stream (issue 26): the cancel watcher
// (server/grpc/cancel_watch.h) cancels it, long before the running request ahead of it ends.
TEST(GrpcServer, ACancelledWaitingRequestLeavesTheQueue) {
  engine::EngineConfig ec;
  ec.max_num_seqs = 1;
  Fixture f = start(ec);
  grpc::ClientContext c1, c2;
  auto r1 = f.stub->Generate(&c1, request({1, 2}, 3500));
  v1::GenerateResponse resp;
  ASSERT_TRUE(r1->Read(&resp));  // running
  auto r2 = f.stub->Generate(&c2, request({3, 4}, 4));
  for (int i = 0; i < 400 && f.engine->stats().waiting == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(f.engine->stats().waiting, 1);
  c2.TryCancel();
  while (r2->Read(&resp)) {
  }
  EXPECT_EQ(r2->Finish().error_code(), grpc::StatusCode::CANCELLED);
  for (int i = 0; i < 400 && f.engine->stats().waiting > 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const engine::EngineStats st = f.engine->stats();
  EXPECT_EQ(st.waiting, 0) << "the cancelled request is still queued";
  EXPECT_EQ(st.running, 1);
  EXPECT_LT(st.generation_tokens, 3500) << "the request ahead ended first: this proves nothing";
  c1.TryCancel();
  while (r1->Read(&resp)) {
  }
  EXPECT_EQ(r1->Finish().error_code(), grpc::StatusCode::CANCELLED);
}

TEST(GrpcServer, StatusCodes) {
  engine::EngineConfig ec;
  ec.max_num_seqs = 1;
  ec.max_waiting = 1;
  Fixture f = start(ec);
  EXPECT_EQ(generate(*f.stub, request({1, 600}, 4)).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(generate(*f.stub, request({}, 4)).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::GenerateRequest text;
  text.set_prompt_text("hello");  // the synthetic model has no tokenizer
  EXPECT_EQ(generate(*f.stub, text).status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  v1::GenerateRequest bad = request({1, 2}, 4);
  bad.mutable_sampling()->set_top_p(2.f);
  EXPECT_EQ(generate(*f.stub, bad).status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // One running, one waiting, the third finds the queue full.
  grpc::ClientContext c1, c2;
  auto r1 = f.stub->Generate(&c1, request({1, 2}, 3500));
  v1::GenerateResponse resp;
  ASSERT_TRUE(r1->Read(&resp));
  auto r2 = f.stub->Generate(&c2, request({3, 4}, 3500));
  ASSERT_TRUE(eventually([&] { return f.engine->stats().waiting == 1; })) << "the second request never queued";
  EXPECT_EQ(generate(*f.stub, request({5, 6}, 4)).status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  c1.TryCancel();
  c2.TryCancel();
  while (r1->Read(&resp)) {
  }
  while (r2->Read(&resp)) {
  }
  r1->Finish();
  r2->Finish();
}

// A scrape of GET /metrics over a plain socket, read to the end (Connection: close: HTTP/1.1
// connections are otherwise kept alive).
std::string scrape(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    send(fd, req.data(), req.size(), 0);
    char buf[4096];
    for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

TEST(GrpcServer, MetricsScrapeHasTheVllmSeries) {
  Fixture f = start();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(generate(*f.stub, request({1, 2, 3}, 5)).status.ok());
  const std::string m = scrape(f.server->metrics_port());
  EXPECT_NE(m.find("200 OK"), std::string::npos);
  for (const char* series :
       {"vllm:num_requests_running 0", "vllm:num_requests_waiting 0", "vllm:kv_cache_usage_perc 0",
        "vllm:prompt_tokens_total 9", "vllm:generation_tokens_total 15", "vllm:num_preemptions_total 0",
        "vllm:prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
        "vllm:request_success_total{finished_reason=\"length\"} 3", "vllm:time_to_first_token_seconds_count 3",
        "vllm:time_per_output_token_seconds_count 3", "vllm:inter_token_latency_seconds_count 12",
        "vllm:e2e_request_latency_seconds_count 3", "vllm:e2e_request_latency_seconds_bucket{le=\"+Inf\"} 3",
        "vllm:cache_config_info{block_size=\"16\",cache_dtype=\"fp32\",num_gpu_blocks=\"512\"} 1",
        // Mixed steps (issue 27): no TPOT target; 15 steps (3 prompts, 12 decodes) in the cost
        // model's window, too few prompt steps (3 of the 4 it needs) for a fit; the
        // budget is what the one decode leaves of 256.
        "flashserve:prefill_budget_tokens 255\n", "flashserve:tpot_target_seconds 0\n", "flashserve:step_cost_samples 15\n",
        "flashserve:step_cost_seconds{term=\"intercept\"} 0\n", "flashserve:step_cost_seconds{term=\"prefill_token\"} 0\n"})
    EXPECT_NE(m.find(series), std::string::npos) << "missing: " << series << "\n" << m;
  EXPECT_EQ(m.find("step_device_seconds_total"), std::string::npos) << "the CPU model does not time its steps";
}

// An FP8 cache (issue 25): generation streams, GetModelInfo and /metrics name the cache dtype.
TEST(GrpcServer, Fp8CacheIsReportedInModelInfoAndMetrics) {
  model::KvCacheOptions kv;
  kv.dtype = DType::kFp8E4M3;
  Fixture f = start({}, "", "", "", {}, kv);
  const Result r = generate(*f.stub, request({5, 17, 300, 42, 9, 11, 250}, 6));
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.tokens.size(), 6u);
  grpc::ClientContext ctx;
  v1::ModelInfo mi;
  ASSERT_TRUE(f.stub->GetModelInfo(&ctx, {}, &mi).ok());
  EXPECT_EQ(mi.dtype(), "fp32");  // the activations'
  EXPECT_EQ(mi.kv_cache_dtype(), "fp8_e4m3");
  const std::string m = scrape(f.server->metrics_port());
  EXPECT_NE(m.find("vllm:cache_config_info{block_size=\"16\",cache_dtype=\"fp8_e4m3\",num_gpu_blocks=\"512\"} 1"),
            std::string::npos)
      << m;
}

TEST(GrpcServer, BearerToken) {
  Fixture f = start({}, "s3cret");
  EXPECT_EQ(generate(*f.stub, request({1, 2}, 2)).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer s3cret");
  EXPECT_TRUE(generate(*f.stub, request({1, 2}, 2), &ctx).status.ok());
  grpc::ClientContext wrong;
  wrong.AddMetadata("authorization", "Bearer nope");
  v1::ServerInfo info;
  EXPECT_EQ(f.stub->GetServerInfo(&wrong, {}, &info).error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// The receive limit (issue 24, point 9): what a real request needs, the context length x 4 bytes
// plus 64 KiB, and no more. A message of exactly that size reaches the handler (which refuses
// these ids as out of the vocabulary: INVALID_ARGUMENT); one byte more is refused by gRPC with
// RESOURCE_EXHAUSTED before it is parsed. (Before: 16 MiB for every model; 24 messages of 14 MiB
// took 1.2 GB.)
TEST(GrpcServer, ReceiveLimitFollowsTheContext) {
  model::LlamaConfig c;
  ASSERT_TRUE(model::synthetic_preset("tiny", &c).ok());
  const int limit = max_receive_bytes_for(c.max_position_embeddings);
  EXPECT_EQ(limit, c.max_position_embeddings * 4 + 65536);
  ServerOptions so;
  so.max_receive_bytes = limit;
  Fixture f = start({}, "", "", "", so);
  // target bytes exactly: 1-byte ids, then some made 2-byte ones (200) to land on it.
  auto sized = [](size_t target) {
    v1::GenerateRequest r = request({}, 2);
    const size_t bulk = target - r.ByteSizeLong() - 8;  // under the target with the field's framing
    r.mutable_prompt_token_ids()->Resize(static_cast<int>(bulk), 1);
    int k = 0;
    while (r.ByteSizeLong() < target) {
      r.add_prompt_token_ids(1);
      if (r.ByteSizeLong() > target) {
        r.mutable_prompt_token_ids()->RemoveLast();
        r.set_prompt_token_ids(k++, 200);
      }
    }
    return r;
  };
  const v1::GenerateRequest at = sized(limit), over = sized(limit + 1);
  ASSERT_EQ(at.ByteSizeLong(), static_cast<size_t>(limit));
  ASSERT_EQ(over.ByteSizeLong(), static_cast<size_t>(limit) + 1);
  const Result r_at = generate(*f.stub, at);
  EXPECT_EQ(r_at.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << r_at.status.error_message();
  const Result r_over = generate(*f.stub, over);
  EXPECT_EQ(r_over.status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << r_over.status.error_message();
  // A full context of the widest ids (4 bytes each) fits; a real request is served.
  v1::GenerateRequest full = request(std::vector<int32_t>(c.max_position_embeddings, 1 << 27), 1);
  for (int i = 0; i < 1024; ++i) full.mutable_sampling()->add_stop_token_ids(1 << 27);  // the most allowed
  ASSERT_LT(full.ByteSizeLong(), static_cast<size_t>(limit));
  const Result r_full = generate(*f.stub, full);
  EXPECT_EQ(r_full.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << r_full.status.error_message();
  const Result ok = generate(*f.stub, request({1, 2, 3}, 2));
  EXPECT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.tokens, reference_greedy({1, 2, 3}, 2));
}

// The token compare (issue 24, point 16) reads every byte whatever they hold; here only what it
// answers can be checked: equal only when equal, lengths included.
TEST(GrpcServer, TokenCompare) {
  EXPECT_TRUE(equal_in_constant_time("Bearer s3cret", "Bearer s3cret"));
  EXPECT_TRUE(equal_in_constant_time("", ""));
  for (const std::string& other : {std::string("Bearer s3creT"), std::string("bearer s3cret"), std::string("Bearer s3cre"),
                                   std::string("Bearer s3crett"), std::string(), std::string("Bearer s3cret\0", 14)})
    EXPECT_FALSE(equal_in_constant_time(other, "Bearer s3cret")) << other.size() << " bytes: " << other;
}

TEST(GrpcServer, DrainingRefusesNewWorkAndFinishesRunning) {
  Fixture f = start();
  grpc::ClientContext ctx;
  auto reader = f.stub->Generate(&ctx, request({1, 2, 3}, 3500));  // runs through the checks below
  v1::GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  auto channel = test::local_channel(f.server->port());
  std::thread drain([&] { f.server->drain_and_stop(30.0); });
  // Health turns NOT_SERVING after the server stops taking work.
  EXPECT_TRUE(eventually([&] { return health(channel) == grpc::health::v1::HealthCheckResponse::NOT_SERVING; }));
  EXPECT_EQ(generate(*f.stub, request({4, 5}, 4)).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  int n = resp.token_ids_size();
  bool finished = false;
  while (reader->Read(&resp)) {
    n += resp.token_ids_size();
    finished = finished || resp.finished();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(finished);
  EXPECT_EQ(n, 3500) << "a running request was cut short by the drain";
  drain.join();
}

// Request ids (issue 24, point 6): at most 128 bytes of printable ASCII, else INVALID_ARGUMENT
// with a short message that does not echo the id (a 1 MiB id was taken, logged and echoed).
TEST(GrpcServer, RequestIdsAreBounded) {
  Fixture f = start();
  auto with_id = [](const std::string& id) {
    v1::GenerateRequest r = request({1, 2, 3}, 2);
    r.set_request_id(id);
    return r;
  };
  std::string printable;
  for (int i = 0; i < 128; ++i) printable.push_back(static_cast<char>(0x20 + i % 95));
  const Result ok = generate(*f.stub, with_id(printable));
  ASSERT_TRUE(ok.status.ok()) << ok.status.error_message();
  EXPECT_EQ(ok.last.request_id(), printable);
  for (const std::string& bad : {std::string(129, 'a'), std::string(1 << 20, 'x'), std::string("a\nb"),
                                 std::string("req\r\n[info] forged"), std::string("tab\there"), std::string("del\x7f"),
                                 std::string("caf\xc3\xa9"), std::string("nul\0x", 5)}) {
    const Result r = generate(*f.stub, with_id(bad));
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad.size() << " bytes";
    EXPECT_LT(r.status.error_message().size(), 100u);
    EXPECT_NE(r.status.error_message().find("request_id"), std::string::npos) << r.status.error_message();
  }
  EXPECT_EQ(f.engine->stats().prompt_tokens, 3) << "a refused id reached the engine";
}

// Shutdown order (issue 24, point 1): once wait() returns, no thread of the server reaches the
// engine any more, so the engine can go first. The metrics thread was the one left running (it
// read Engine::stats() of a destroyed engine): its port must be closed by then.
bool connects(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  close(fd);
  return ok;
}

TEST(GrpcServer, WaitJoinsEveryThreadThatReachesTheEngine) {
  Fixture f = start();
  ASSERT_TRUE(generate(*f.stub, request({1, 2, 3}, 4)).status.ok());
  const int mport = f.server->metrics_port();
  ASSERT_NE(scrape(mport).find("vllm:generation_tokens_total 4"), std::string::npos);
  f.server->drain_and_stop(1.0);
  f.server->wait();
  f.engine.reset();  // the order main() had: the engine before the server object
  EXPECT_FALSE(connects(mport)) << "the metrics thread still serves after wait(): it can reach a destroyed engine";
  EXPECT_EQ(scrape(mport), "");
  f.server.reset();
}

// A model whose forward pass fails (a kernel error): the request ends with INTERNAL and the
// server goes on.
class FailingModel : public model::Model {
 public:
  FailingModel() {
    EXPECT_TRUE(model::synthetic_preset("tiny", &config_).ok());
    shape_.num_blocks = 64;
    shape_.block_size = 16;
  }
  const model::LlamaConfig& config() const override { return config_; }
  const KVStorageShape& kv_shape() const override { return shape_; }
  Status forward(const model::ForwardBatch&, std::vector<float>*) override {
    return internal_error("decode kernel: an illegal memory access (simulated)");
  }
  Status copy_blocks(const BlockCopy*, int32_t) override { return Status::Ok(); }

 private:
  model::LlamaConfig config_;
  KVStorageShape shape_;
};

// A server on any free port over `engine` (64 blocks, its model given), and a stub to it.
struct Served {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<v1::Generation::Stub> stub;
};
Served serve(std::unique_ptr<model::Model> model) {
  Served s;
  engine::EngineConfig ec;
  ec.num_blocks = 64;
  EXPECT_TRUE(engine::Engine::create(ec, std::move(model), &s.engine).ok());
  ServerOptions so;
  so.port = 0;
  EXPECT_TRUE(GrpcServer::start(so, s.engine.get(), &s.server).ok());
  s.stub = v1::Generation::NewStub(test::local_channel(s.server->port()));
  return s;
}

TEST(GrpcServer, KernelErrorsAreInternal) {
  Served s = serve(std::make_unique<FailingModel>());
  ASSERT_TRUE(s.server != nullptr);
  auto& stub = s.stub;
  const Result r = generate(*stub, request({1, 2, 3}, 4));
  EXPECT_EQ(r.status.error_code(), grpc::StatusCode::INTERNAL);
  EXPECT_NE(r.status.error_message().find("illegal memory access"), std::string::npos) << r.status.error_message();
  grpc::ClientContext ctx;
  v1::ServerInfo info;
  EXPECT_TRUE(stub->GetServerInfo(&ctx, {}, &info).ok());
  EXPECT_NEAR(info.kv_cache_usage(), 0.0, 1e-12);
}

// A model that times its steps on the device (as the CUDA model does): the tiny model's steps,
// each reported as idle 1 ms (none after the engine waited for work), prepare 2 ms, run 3 ms.
class DeviceTimedModel : public test::AsyncModel {
 public:
  DeviceTimedModel() : AsyncModel(test::tiny_model(7, 64, 16)) {}
  Status begin_step(const model::ForwardBatch& b, const std::vector<model::SampleRow>& rows) override {
    ++steps_;
    after_break_ = broken_.exchange(false);
    if (after_break_) ++after_breaks_;
    return AsyncModel::begin_step(b, rows);
  }
  bool last_step_device_time(StepDeviceTime* t) const override {
    *t = {after_break_ ? 0.0 : 1e-3, 2e-3, 3e-3};  // no idle after the engine waited for work
    return true;
  }
  void break_step_timing() override { broken_ = true; }
  int steps() const { return steps_; }
  int steps_after_breaks() const { return after_breaks_; }

 private:
  std::atomic<int> steps_{0}, after_breaks_{0};
  std::atomic<bool> broken_{false};
  bool after_break_ = false;
};

// Issue 27's per-step breakdown: the engine sums the model's device times, /metrics shows them
// (a model that does not time its steps, as the CPU one, has no such series: the scrape test).
TEST(GrpcServer, DeviceStepTimesAreSummedIntoMetrics) {
  auto model = std::make_unique<DeviceTimedModel>();
  const DeviceTimedModel* timed = model.get();
  Served s = serve(std::move(model));
  ASSERT_TRUE(s.server != nullptr);
  engine::Engine* e = s.engine.get();
  ASSERT_TRUE(generate(*s.stub, request({1, 2, 3}, 6)).status.ok());
  const int steps = timed->steps(), fresh = timed->steps_after_breaks();
  ASSERT_GE(steps, 6);
  EXPECT_GE(fresh, 1);  // the first step follows the engine's wait for work
  EXPECT_LT(fresh, steps);
  const engine::EngineStats st = e->stats();
  EXPECT_EQ(st.device_timed_steps, steps);
  EXPECT_NEAR(st.step_device_idle_s, 1e-3 * (steps - fresh), 1e-9);
  EXPECT_NEAR(st.step_device_prepare_s, 2e-3 * steps, 1e-9);
  EXPECT_NEAR(st.step_device_run_s, 3e-3 * steps, 1e-9);
  const std::string m = Metrics(e).render();
  for (const std::string& series : std::vector<std::string>{
           "flashserve:device_timed_steps_total " + std::to_string(steps) + "\n",
        "flashserve:step_device_seconds_total{part=\"run\"} ", "flashserve:step_device_seconds_total{part=\"idle\"} ",
        "flashserve:step_device_seconds_total{part=\"prepare\"} "})
    EXPECT_NE(m.find(series), std::string::npos) << "missing: " << series << "\n" << m;
}

// One ServerReflectionInfo exchange, encoded by hand (field 7, list_services = "*"), through the
// generic stub: the response's bytes and the final status.
struct Reflected {
  std::string bytes;
  grpc::Status status;
};
Reflected reflect(int port, const std::string& authorization = "") {
  auto channel = test::local_channel(port);
  grpc::GenericStub generic(channel);
  grpc::CompletionQueue cq;
  grpc::ClientContext ctx;
  if (!authorization.empty()) ctx.AddMetadata("authorization", authorization);
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  auto call = generic.PrepareCall(&ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
  void* tag;
  bool ok;
  auto step = [&](intptr_t want) {
    EXPECT_TRUE(cq.Next(&tag, &ok));
    EXPECT_EQ(reinterpret_cast<intptr_t>(tag), want);
    return ok;
  };
  Reflected out;
  call->StartCall(reinterpret_cast<void*>(1));
  if (step(1)) {
    const std::string list_services("\x3a\x01*", 3);  // list_services = "*"
    grpc::Slice slice(list_services);
    grpc::ByteBuffer req(&slice, 1), resp;
    call->Write(req, reinterpret_cast<void*>(2));
    if (step(2)) {
      call->Read(&resp, reinterpret_cast<void*>(3));
      if (step(3)) {
        std::vector<grpc::Slice> slices;
        EXPECT_TRUE(resp.Dump(&slices).ok());
        for (const auto& sl : slices) out.bytes.append(reinterpret_cast<const char*>(sl.begin()), sl.size());
      }
    }
    call->WritesDone(reinterpret_cast<void*>(4));
    step(4);
  }
  call->Finish(&out.status, reinterpret_cast<void*>(5));
  step(5);
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  return out;
}

// Server reflection lists the service.
TEST(GrpcServer, ReflectionListsTheService) {
  Fixture f = start();
  const Reflected r = reflect(f.server->port());
  EXPECT_NE(r.bytes.find("flashserve.v1.Generation"), std::string::npos);
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
}

// Reflection follows the bearer token (issue 24, point 13): without it (or with a wrong one) the
// exchange says nothing of the services (its one response is an UNAUTHENTICATED error_response)
// and ends UNAUTHENTICATED; with it, the services are listed; open_reflection leaves it open.
// Health stays open either way. (Before: reflection listed the services to anyone.)
TEST(GrpcServer, ReflectionFollowsTheToken) {
  Fixture f = start({}, "s3cret");
  for (const std::string& auth : {std::string(), std::string("Bearer nope")}) {
    const Reflected r = reflect(f.server->port(), auth);
    EXPECT_EQ(r.bytes.find("flashserve.v1.Generation"), std::string::npos) << "'" << auth << "'";
    EXPECT_NE(r.bytes.find("a valid bearer token is required"), std::string::npos) << "'" << auth << "'";
    EXPECT_EQ(r.status.error_code(), grpc::StatusCode::UNAUTHENTICATED) << "'" << auth << "'";
  }
  const Reflected with = reflect(f.server->port(), "Bearer s3cret");
  EXPECT_NE(with.bytes.find("flashserve.v1.Generation"), std::string::npos);
  EXPECT_TRUE(with.status.ok()) << with.status.error_message();
  auto channel = test::local_channel(f.server->port());
  auto hstub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext hctx;
  grpc::health::v1::HealthCheckResponse hresp;
  EXPECT_TRUE(hstub->Check(&hctx, {}, &hresp).ok()) << "health must stay open for probes";

  ServerOptions so;
  so.open_reflection = true;
  Fixture open = start({}, "s3cret", "", "", so);
  const Reflected r = reflect(open.server->port());
  EXPECT_NE(r.bytes.find("flashserve.v1.Generation"), std::string::npos);
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(generate(*open.stub, request({1, 2}, 2)).status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << "open reflection does not open Generate";
}

TEST(GrpcServer, NotServingWhileLoading) {
  ServerOptions so;
  so.port = 0;
  std::unique_ptr<GrpcServer> srv;
  ASSERT_TRUE(GrpcServer::start(so, nullptr, &srv).ok());
  auto channel = test::local_channel(srv->port());
  auto stub = v1::Generation::NewStub(channel);
  EXPECT_EQ(health(channel), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(health(channel, "flashserve.v1.Generation"), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(generate(*stub, request({1, 2}, 2)).status.error_code(), grpc::StatusCode::UNAVAILABLE);
  Fixture loaded = start();  // an engine, handed over once "loaded"
  srv->set_engine(loaded.engine.get());
  EXPECT_EQ(health(channel), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(health(channel, "flashserve.v1.Generation"), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_TRUE(generate(*stub, request({1, 2}, 2)).status.ok());
  srv.reset();
}

// A port in use is an error, not a second listener sharing it (gRPC sets SO_REUSEPORT unless told
// not to): the first server keeps every connection. Servers asking for port 0 each get their own.
// Before: the second start succeeded and the kernel split new connections between the two.
TEST(GrpcServer, APortInUseFails) {
  Fixture first = start();
  ServerOptions so;
  so.port = first.server->port();
  so.metrics_port = -1;
  std::unique_ptr<GrpcServer> second;
  const Status st = GrpcServer::start(so, nullptr, &second);
  EXPECT_FALSE(st.ok()) << "a second server bound port " << so.port << " (SO_REUSEPORT)";
  EXPECT_NE(st.message().find("cannot listen on"), std::string::npos) << st.message();
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(generate(*first.stub, request({1, 2}, 2)).status.ok());
  std::set<int> ports{first.server->port()};
  std::vector<std::unique_ptr<GrpcServer>> any(6);
  ServerOptions zero;
  zero.port = 0;
  zero.metrics_port = -1;
  for (auto& s : any) {
    ASSERT_TRUE(GrpcServer::start(zero, nullptr, &s).ok());
    EXPECT_TRUE(ports.insert(s->port()).second) << "port " << s->port() << " given twice";
  }
}

TEST(GrpcServer, HealthServingThenNotServingWhileDraining) {
  Fixture f = start();
  auto channel = test::local_channel(f.server->port());
  EXPECT_EQ(health(channel), grpc::health::v1::HealthCheckResponse::SERVING);
  grpc::ClientContext ctx;
  auto reader = f.stub->Generate(&ctx, request({1, 2, 3}, 3500));
  v1::GenerateResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  std::thread drain([&] { f.server->drain_and_stop(30.0); });
  // The drain thread flips health as it starts: wait for it (a fixed 20 ms failed on a loaded
  // 2-core machine), while the request still runs (3500 tokens).
  EXPECT_TRUE(eventually([&] { return health(channel) == grpc::health::v1::HealthCheckResponse::NOT_SERVING; }));
  EXPECT_EQ(health(channel, "flashserve.v1.Generation"), grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  while (reader->Read(&resp)) {
  }
  reader->Finish();
  drain.join();
}

// One unary call of `method` with raw bytes for its request (the generic stub): the status.
grpc::Status raw_unary_call(grpc::GenericStub& generic, const std::string& method, const std::string& payload) {
  grpc::Slice slice(payload);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &reply, [&](grpc::Status s) {
    std::lock_guard<std::mutex> lock(mu);
    status = s;
    done = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  return status;
}

// Garbage where a request message should be: an error status, and the server lives on.
TEST(GrpcServer, MalformedMessagesAreRejected) {
  Fixture f = start();
  auto channel = test::local_channel(f.server->port());
  grpc::GenericStub generic(channel);
  for (const char* method : {"/flashserve.v1.Generation/GetModelInfo", "/flashserve.v1.Generation/Generate",
                             "/flashserve.v1.Generation/NoSuchMethod"}) {
    const std::string junk = "\xff\xff\xff\xff\x0f garbage that is no protobuf";
    EXPECT_FALSE(raw_unary_call(generic, method, junk).ok()) << method;
  }
  EXPECT_TRUE(generate(*f.stub, request({1, 2}, 3)).status.ok()) << "the server did not survive";
}

// Malformed protobuf payloads (issue 24, point 11) get INVALID_ARGUMENT "could not parse
// request", not INTERNAL with an empty message, on every one-message method; random bytes that
// happen to parse get the handler's own error, with a message, and never INTERNAL.
TEST(GrpcServer, UnparsableRequestsAreInvalidArgument) {
  Fixture f = start();
  auto channel = test::local_channel(f.server->port());
  grpc::GenericStub generic(channel);
  auto call = [&](const std::string& method, const std::string& payload) {
    return raw_unary_call(generic, method, payload);
  };
  const std::vector<std::string> methods = {"Generate", "Tokenize", "Detokenize", "Abort", "GetModelInfo", "GetServerInfo"};
  const std::vector<std::string> unparsable = {
      std::string("\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"),  // a varint of 11 bytes
      std::string("\x0a\x05" "ab"),                               // field 1: 5 bytes announced, 2 sent
      std::string("\xff\xff\xff\xff\x0f garbage that is no protobuf"),
      std::string("\x07"),                                          // wire type 7 does not exist
  };
  auto expect_unparsable = [&](const std::string& m, const std::string& payload, size_t i) {
    const grpc::Status st = call("/flashserve.v1.Generation/" + m, payload);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << m << " payload " << i << ": " << st.error_message();
    EXPECT_EQ(st.error_message(), "could not parse request") << m << " payload " << i;
  };
  for (const auto& m : methods)
    for (size_t i = 0; i < unparsable.size(); ++i) expect_unparsable(m, unparsable[i], i);
  for (const std::string m : {"Generate", "Abort"})  // their field 1 is a string: bad UTF-8 there
    expect_unparsable(m, std::string("\x0a\x02\xc3\x28"), unparsable.size());
  std::mt19937 rng(11);
  for (int i = 0; i < 120; ++i) {
    std::string junk(static_cast<size_t>(std::uniform_int_distribution<int>(1, 64)(rng)), '\0');
    for (auto& c : junk) c = static_cast<char>(rng());
    const std::string& m = methods[static_cast<size_t>(i) % methods.size()];
    const grpc::Status st = call("/flashserve.v1.Generation/" + m, junk);
    EXPECT_NE(st.error_code(), grpc::StatusCode::INTERNAL) << m << ": " << st.error_message();
    if (!st.ok()) {
      EXPECT_FALSE(st.error_message().empty()) << m << " " << st.error_code();
    }
  }
  EXPECT_TRUE(generate(*f.stub, request({1, 2}, 3)).status.ok()) << "the server did not survive";
}

TEST(GrpcServer, Tls) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl to make a certificate";
  const auto dir = std::filesystem::temp_directory_path() / ("flashserve_tls_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string cert = (dir / "cert.pem").string(), key = (dir / "key.pem").string();
  const std::string cmd = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
                          "subjectAltName=IP:127.0.0.1 -keyout " + key + " -out " + cert + " >/dev/null 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Fixture f = start({}, "", cert, key);
  std::ifstream in(cert);
  std::stringstream pem;
  pem << in.rdbuf();
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = pem.str();
  const std::string target = "127.0.0.1:" + std::to_string(f.server->port());
  auto tls_channel = grpc::CreateChannel(target, grpc::SslCredentials(ssl));
  std::string error;
  EXPECT_TRUE(client::wait_connected(tls_channel, target, 20, &error)) << error;
  auto tls = v1::Generation::NewStub(tls_channel);
  EXPECT_TRUE(generate(*tls, request({1, 2}, 3)).status.ok());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_FALSE(generate(*f.stub, request({1, 2}, 3), &ctx).status.ok()) << "a plaintext client got through";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace flashserve::server
