// Who owns a request (issue 24, points 12, 14 and 15), over loopback against the real server:
// server-assigned ids are random 128-bit; Abort reaches only the caller's own requests (another
// owner's id is answered exactly as an unknown one) unless the caller holds the admin token;
// client-chosen ids live in the caller's namespace; --prefix-cache-isolation=identity keeps one
// identity's cached prefixes from every other's. Identities: two tenant tokens and the admin
// token, or, without tokens, two connections.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "flashserve/v1/generation.grpc.pb.h"
#include "server/grpc/server.h"
#include "tests/grpc_support.h"
#include "tests/model_support.h"

namespace flashserve::server {
namespace {

namespace v1 = ::flashserve::v1;
using Clock = std::chrono::steady_clock;

const std::string kTokenA = "tenant-a-secret", kTokenB = "tenant-b-secret", kAdmin = "admin-secret";

struct Served {
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<GrpcServer> server;
};

// The server over the tiny model; `tokens` empty: no auth.
Served serve(std::vector<std::string> tokens, const std::string& admin,
             PrefixCacheIsolation isolation = PrefixCacheIsolation::kNone) {
  Served s;
  engine::EngineConfig ec;
  ec.num_blocks = 1024;
  EXPECT_TRUE(engine::Engine::create(ec, test::tiny_model(7, ec.num_blocks, ec.block_size), &s.engine).ok());
  ServerOptions so;
  so.port = 0;
  so.metrics_port = -1;
  if (!tokens.empty()) so.auth_token = tokens[0];
  if (tokens.size() > 1) so.extra_auth_tokens.assign(tokens.begin() + 1, tokens.end());
  so.admin_token = admin;
  so.prefix_cache_isolation = isolation;
  const Status st = GrpcServer::start(so, s.engine.get(), &s.server);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return s;
}

// A client on its own connection (a channel of its own subchannel pool: gRPC would otherwise share
// one connection between channels to the same target), sending `token` when non-empty.
struct Client {
  std::unique_ptr<v1::Generation::Stub> stub;
  std::string token;
  void prepare(grpc::ClientContext* ctx) const {
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  }
};

Client connect(const Served& s, const std::string& token = "") {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  Client c;
  c.stub = v1::Generation::NewStub(test::local_channel(s.server->port(), args));
  c.token = token;
  return c;
}

v1::GenerateRequest request(std::vector<int32_t> prompt, int max_tokens, const std::string& id = "") {
  v1::GenerateRequest r;
  for (int32_t t : prompt) r.add_prompt_token_ids(t);
  r.mutable_sampling()->set_temperature(0.f);
  r.mutable_sampling()->set_max_tokens(max_tokens);
  r.mutable_sampling()->set_ignore_eos(true);
  r.set_request_id(id);
  return r;
}

struct Result {
  std::vector<int32_t> tokens;
  std::string first_id;  // the request_id of the first message
  v1::GenerateResponse last;
  grpc::Status status;
};

Result generate(const Client& c, const v1::GenerateRequest& req) {
  grpc::ClientContext ctx;
  c.prepare(&ctx);
  auto reader = c.stub->Generate(&ctx, req);
  Result r;
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (r.first_id.empty()) r.first_id = resp.request_id();
    r.tokens.insert(r.tokens.end(), resp.token_ids().begin(), resp.token_ids().end());
    if (resp.finished()) r.last = resp;
  }
  r.status = reader->Finish();
  return r;
}

// A stream in flight: started, its first message read (so the engine has it), read to the end
// by finish().
struct Running {
  std::unique_ptr<grpc::ClientContext> ctx = std::make_unique<grpc::ClientContext>();
  std::unique_ptr<grpc::ClientReader<v1::GenerateResponse>> reader;
  std::string id;  // as the first message echoes it
  Clock::time_point sent;
  std::vector<int32_t> first_tokens;

  Result finish() {
    Result r;
    r.first_id = id;
    r.tokens = first_tokens;
    v1::GenerateResponse resp;
    while (reader->Read(&resp)) {
      r.tokens.insert(r.tokens.end(), resp.token_ids().begin(), resp.token_ids().end());
      if (resp.finished()) r.last = resp;
    }
    r.status = reader->Finish();
    return r;
  }
};

std::unique_ptr<Running> start_running(const Client& c, const v1::GenerateRequest& req) {
  auto run = std::make_unique<Running>();
  c.prepare(run->ctx.get());
  run->sent = Clock::now();
  run->reader = c.stub->Generate(run->ctx.get(), req);
  v1::GenerateResponse resp;
  EXPECT_TRUE(run->reader->Read(&resp));
  run->id = resp.request_id();
  run->first_tokens.assign(resp.token_ids().begin(), resp.token_ids().end());
  return run;
}

struct AbortAnswer {
  grpc::Status status;
  v1::AbortResponse resp;
};

AbortAnswer abort_ids(const Client& c, std::vector<std::string> ids) {
  grpc::ClientContext ctx;
  c.prepare(&ctx);
  v1::AbortRequest req;
  for (auto& id : ids) req.add_request_ids(id);
  AbortAnswer a;
  a.status = c.stub->Abort(&ctx, req, &a.resp);
  return a;
}

// Another owner's id must be answered exactly as an id nobody uses.
void expect_same_answer(const AbortAnswer& got, const AbortAnswer& unknown, const std::string& what) {
  EXPECT_EQ(got.status.error_code(), unknown.status.error_code()) << what;
  EXPECT_EQ(got.status.error_message(), unknown.status.error_message()) << what;
  EXPECT_EQ(got.resp.SerializeAsString(), unknown.resp.SerializeAsString()) << what;
}

// 1000 server-assigned ids: "req-" + 32 lowercase hex digits, all different, no counter (no two
// in a row one apart, every one of the 128 bits set in about half of them). Before: "req-1",
// "req-2", ...
TEST(GrpcOwner, ServerIdsAreRandom128Bit) {
  Served s = serve({}, "");
  constexpr int kThreads = 8, kEach = 125;
  std::vector<std::vector<std::string>> ids(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      Client c = connect(s);
      for (int i = 0; i < kEach; ++i) {
        Result r = generate(c, request({5, 6, 7}, 1));
        ASSERT_TRUE(r.status.ok()) << r.status.error_message();
        ASSERT_EQ(r.first_id, r.last.request_id());
        ids[t].push_back(r.first_id);
      }
    });
  for (auto& th : threads) th.join();
  const std::regex shape("req-[0-9a-f]{32}");
  std::set<std::string> distinct;
  std::vector<int> ones(128, 0);
  int in_sequence = 0;
  for (const auto& list : ids) {
    ASSERT_EQ(list.size(), static_cast<size_t>(kEach));
    unsigned __int128 prev = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string& id = list[i];
      ASSERT_TRUE(std::regex_match(id, shape)) << id;
      distinct.insert(id);
      unsigned __int128 v = 0;
      for (int k = 0; k < 32; ++k) {
        const char ch = id[4 + k];
        v = (v << 4) | static_cast<unsigned>(ch <= '9' ? ch - '0' : ch - 'a' + 10);
      }
      for (int b = 0; b < 128; ++b) ones[b] += static_cast<int>((v >> b) & 1);
      if (i > 0 && (v - prev == 1 || prev - v == 1)) ++in_sequence;
      prev = v;
    }
  }
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kThreads * kEach));
  EXPECT_EQ(in_sequence, 0) << "ids one apart: a counter";
  for (int b = 0; b < 128; ++b)  // 1000 fair coins: 500 +- 16 (sd); 380..620 is 7.6 sd
    EXPECT_TRUE(ones[b] > 380 && ones[b] < 620) << "bit " << b << " set in " << ones[b] << " of 1000 ids";
}

// Tenant A cannot abort tenant B's requests, by B's own id or the server's: A gets what an
// unknown id gets (OK, aborted 0) and B's stream runs to its end. B aborts its own from another
// connection (the owner is the token, not the connection); the admin token aborts anyone's.
// Before: A's Abort aborted B's request.
TEST(GrpcOwner, AbortReachesOnlyTheOwnerOrTheAdmin) {
  Served s = serve({kTokenA, kTokenB}, kAdmin);
  Client a = connect(s, kTokenA), b = connect(s, kTokenB), b2 = connect(s, kTokenB), admin = connect(s, kAdmin);
  Client nobody = connect(s, "wrong");
  EXPECT_EQ(abort_ids(nobody, {"x"}).status.error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // job-1: 1500 tokens (1500 steps), still running after the four aborts below on a loaded
  // machine too; the other one 4000, still running 2500 steps later for the admin's abort.
  auto named = start_running(b, request({1, 2, 3, 4}, 1500, "job-1"));
  auto assigned = start_running(b, request({9, 8, 7}, 4000));
  ASSERT_EQ(named->id, "job-1");
  ASSERT_EQ(assigned->id.rfind("req-", 0), 0u) << assigned->id;
  const AbortAnswer unknown = abort_ids(a, {"no-such-id"});
  ASSERT_TRUE(unknown.status.ok()) << unknown.status.error_message();
  EXPECT_EQ(unknown.resp.aborted(), 0);
  expect_same_answer(abort_ids(a, {"job-1"}), unknown, "A aborting B's job-1");
  expect_same_answer(abort_ids(a, {assigned->id}), unknown, "A aborting B's server-assigned id");
  expect_same_answer(abort_ids(a, {"job-1", assigned->id}), unknown, "A aborting both");
  const double aborts_done_s = std::chrono::duration<double>(Clock::now() - named->sent).count();

  const Result r = named->finish();  // B's stream: untouched
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_LENGTH);
  EXPECT_EQ(r.tokens.size(), 1500u);
  EXPECT_EQ(r.last.request_id(), "job-1");
  // It was still running when A's aborts had been answered, so they did reach a live request.
  EXPECT_GT(r.last.timings().elapsed_s(), aborts_done_s);

  // The admin token: anyone's request, by the id the owner sees.
  const AbortAnswer by_admin = abort_ids(admin, {assigned->id});
  ASSERT_TRUE(by_admin.status.ok());
  EXPECT_EQ(by_admin.resp.aborted(), 1);
  const Result ra = assigned->finish();
  EXPECT_EQ(ra.last.finish_reason(), v1::FINISH_REASON_ABORTED);

  // B's own, from another of B's connections.
  auto mine = start_running(b, request({4, 4, 4}, 3000, "job-2"));
  const AbortAnswer own = abort_ids(b2, {"job-2", "no-such-id"});
  ASSERT_TRUE(own.status.ok());
  EXPECT_EQ(own.resp.aborted(), 1);
  EXPECT_EQ(mine->finish().last.finish_reason(), v1::FINISH_REASON_ABORTED);
}

// Without tokens the connection is the owner: another connection's Abort is an unknown id, the
// connection that sent it can abort it, and the admin token (accepted without tenant tokens)
// aborts any.
TEST(GrpcOwner, WithoutTokensTheConnectionOwnsItsRequests) {
  Served s = serve({}, kAdmin);
  Client x = connect(s), y = connect(s), admin = connect(s, kAdmin);
  auto run = start_running(x, request({1, 2, 3}, 3000, "job"));
  auto other = start_running(x, request({3, 2, 1}, 3000, "job-b"));
  const AbortAnswer unknown = abort_ids(y, {"no-such-id"});
  expect_same_answer(abort_ids(y, {"job"}), unknown, "another connection aborting job");
  const AbortAnswer own = abort_ids(x, {"job"});
  EXPECT_EQ(own.resp.aborted(), 1);
  EXPECT_EQ(run->finish().last.finish_reason(), v1::FINISH_REASON_ABORTED);
  EXPECT_EQ(abort_ids(admin, {"job-b"}).resp.aborted(), 1);
  EXPECT_EQ(other->finish().last.finish_reason(), v1::FINISH_REASON_ABORTED);
}

// Client-chosen ids are in the caller's namespace: A holding "batch-7" (or an id in the server's
// own "req-" form) does not keep B from using it at the same time, and each sees its own id echoed;
// A reusing its own in-flight id is still "already in use". Before: B got "already in use".
TEST(GrpcOwner, ClientIdsLiveInTheCallersNamespace) {
  Served s = serve({kTokenA, kTokenB}, "");
  Client a = connect(s, kTokenA), b = connect(s, kTokenB);
  const std::string server_like = "req-00000000000000000000000000000001";
  auto squat = start_running(a, request({1, 2, 3}, 3000, "batch-7"));
  auto squat2 = start_running(a, request({1, 2, 3}, 3000, server_like));
  Result rb;
  std::thread tb([&] { rb = generate(b, request({5, 6, 7}, 40, "batch-7")); });
  const Result rb2 = generate(b, request({5, 6, 7}, 40, server_like));
  tb.join();
  ASSERT_TRUE(rb.status.ok()) << rb.status.error_message();
  EXPECT_EQ(rb.last.request_id(), "batch-7");
  EXPECT_EQ(rb.tokens.size(), 40u);
  ASSERT_TRUE(rb2.status.ok()) << rb2.status.error_message();
  EXPECT_EQ(rb2.last.request_id(), server_like);

  const Result again = generate(a, request({1, 2, 3}, 4, "batch-7"));
  EXPECT_EQ(again.status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(again.status.error_message().find("already in use"), std::string::npos) << again.status.error_message();
  EXPECT_NE(again.status.error_message().find("batch-7"), std::string::npos) << "the message names the client's id";

  EXPECT_EQ(abort_ids(a, {"batch-7", server_like}).resp.aborted(), 2);
  EXPECT_EQ(squat->finish().last.request_id(), "batch-7");
  EXPECT_EQ(squat2->finish().last.finish_reason(), v1::FINISH_REASON_ABORTED);
}

int32_t cached(const Result& r) {
  EXPECT_TRUE(r.status.ok()) << r.status.error_message();
  return r.last.usage().cached_tokens();
}

v1::GenerateRequest prompt_of_64(uint64_t salt = 0) {
  std::vector<int32_t> p;
  for (int i = 0; i < 64; ++i) p.push_back(3 + (i * 37) % 500);
  v1::GenerateRequest r = request(p, 2);
  r.set_cache_salt(salt);
  return r;
}

// --prefix-cache-isolation=identity: B sending A's prompt finds nothing cached while A finds its
// own; the client's cache_salt still splits one identity's. Off (the default): B gets A's blocks.
TEST(GrpcOwner, PrefixCacheIsolationByIdentity) {
  {
    Served s = serve({kTokenA, kTokenB}, kAdmin, PrefixCacheIsolation::kIdentity);
    Client a = connect(s, kTokenA), b = connect(s, kTokenB), admin = connect(s, kAdmin);
    EXPECT_EQ(cached(generate(a, prompt_of_64())), 0);
    EXPECT_GT(cached(generate(a, prompt_of_64())), 0) << "A's own prefix is cached";
    EXPECT_EQ(cached(generate(b, prompt_of_64())), 0) << "B must not reuse A's blocks";
    EXPECT_EQ(cached(generate(admin, prompt_of_64())), 0) << "nor the admin";
    EXPECT_GT(cached(generate(b, prompt_of_64())), 0) << "B's own prefix is cached";
    EXPECT_EQ(cached(generate(a, prompt_of_64(9))), 0) << "A's cache_salt 9 is another cache";
    EXPECT_GT(cached(generate(a, prompt_of_64(9))), 0);
  }
  {  // without tokens: each connection
    Served s = serve({}, "", PrefixCacheIsolation::kIdentity);
    Client x = connect(s), y = connect(s);
    EXPECT_EQ(cached(generate(x, prompt_of_64())), 0);
    EXPECT_GT(cached(generate(x, prompt_of_64())), 0);
    EXPECT_EQ(cached(generate(y, prompt_of_64())), 0);
  }
  {  // shared: the default
    Served s = serve({kTokenA, kTokenB}, "");
    Client a = connect(s, kTokenA), b = connect(s, kTokenB);
    EXPECT_EQ(cached(generate(a, prompt_of_64())), 0);
    EXPECT_GT(cached(generate(b, prompt_of_64())), 0) << "shared: B reuses A's blocks";
    EXPECT_EQ(cached(generate(b, prompt_of_64(9))), 0) << "unless the cache_salt differs";
  }
}

}  // namespace
}  // namespace flashserve::server
