// Text over gRPC (issue 23): prompts as text or chat messages, streamed text beside the ids,
// stop strings, Tokenize / Detokenize, GetModelInfo's tokenizer and template, and the errors for
// bad text. The tiny synthetic model behind a small byte-level tokenizer with a ChatML template.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "flashserve/v1/generation.grpc.pb.h"
#include "server/grpc/server.h"
#include "tests/grpc_support.h"
#include "tests/model_support.h"
#include "tests/text_support.h"

namespace flashserve::server {
namespace {

namespace v1 = ::flashserve::v1;

const char* kChatML =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + "
    "'\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

struct Fixture {
  text::TextModel text;
  std::unique_ptr<engine::Engine> engine;
  std::unique_ptr<GrpcServer> server;
  std::unique_ptr<v1::Generation::Stub> stub;
};

std::unique_ptr<Fixture> start() {
  auto f = std::make_unique<Fixture>();
  EXPECT_TRUE(text::TextModel::from_tokenizer(test::small_tokenizer(kChatML), "test tokenizer", "test", &f->text).ok());
  EXPECT_TRUE(engine::Engine::create({}, test::tiny_model(7, 512, 16), &f->engine).ok());
  ServerOptions so;
  so.port = 0;
  so.metrics_port = -1;
  EXPECT_TRUE(GrpcServer::start(so, nullptr, &f->server).ok());
  f->server->set_engine(f->engine.get(), &f->text);
  f->stub = v1::Generation::NewStub(test::local_channel(f->server->port()));
  return f;
}

struct Result {
  std::vector<int32_t> ids;
  std::string text;
  v1::GenerateResponse last;
  grpc::Status status;
};

Result generate(v1::Generation::Stub& stub, const v1::GenerateRequest& req) {
  grpc::ClientContext ctx;
  auto reader = stub.Generate(&ctx, req);
  Result r;
  v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    r.ids.insert(r.ids.end(), resp.token_ids().begin(), resp.token_ids().end());
    r.text += resp.text();
    if (resp.finished()) r.last = resp;
  }
  r.status = reader->Finish();
  return r;
}

v1::GenerateRequest greedy(int max_tokens) {
  v1::GenerateRequest r;
  r.mutable_sampling()->set_temperature(0.f);
  r.mutable_sampling()->set_max_tokens(max_tokens);
  r.mutable_sampling()->set_ignore_eos(true);
  return r;
}

std::string decode(const text::Tokenizer& t, const std::vector<int32_t>& ids) {
  std::vector<int32_t> known;  // the tiny model's vocabulary (512) is larger than the tokenizer's
  for (int32_t id : ids)
    if (t.valid_id(id)) known.push_back(id);
  std::string s;
  EXPECT_TRUE(t.decode(known, true, &s).ok());
  return s;
}

TEST(GrpcText, TextPromptStreamsTextThatEqualsDecode) {
  auto f = start();
  v1::GenerateRequest req = greedy(40);
  req.set_prompt_text("hello world <|end|> caf\xc3\xa9");
  const Result r = generate(*f->stub, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  std::vector<int32_t> prompt;
  ASSERT_TRUE(f->text.tokenizer().encode(req.prompt_text(), true, &prompt).ok());
  EXPECT_EQ(r.last.usage().prompt_tokens(), static_cast<int>(prompt.size()));
  EXPECT_EQ(r.ids, test::reference_greedy(7, prompt, 40));  // the same tokens as the ids prompt
  EXPECT_EQ(r.text, decode(f->text.tokenizer(), r.ids));
  EXPECT_EQ(r.last.finish_reason(), v1::FINISH_REASON_LENGTH);
}

TEST(GrpcText, ChatMessagesGoThroughTheTemplate) {
  auto f = start();
  v1::TokenizeRequest tr;
  auto* m = tr.add_messages();
  m->set_role("system");
  m->set_content("be brief");
  m = tr.add_messages();
  m->set_role("user");
  m->set_content("hello");
  tr.set_add_generation_prompt(true);
  v1::TokenizeResponse tok;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(f->stub->Tokenize(&ctx, tr, &tok).ok());
  }
  EXPECT_EQ(tok.prompt(), "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n");
  v1::GenerateRequest req = greedy(8);
  *req.mutable_messages() = tr.messages();
  const Result r = generate(*f->stub, req);
  ASSERT_TRUE(r.status.ok()) << r.status.error_message();
  EXPECT_EQ(r.last.usage().prompt_tokens(), tok.token_ids_size());
  const std::vector<int32_t> prompt(tok.token_ids().begin(), tok.token_ids().end());
  EXPECT_EQ(r.ids, test::reference_greedy(7, prompt, 8));
  // Detokenize gives the prompt back.
  v1::DetokenizeRequest dr;
  *dr.mutable_token_ids() = tok.token_ids();
  v1::DetokenizeResponse dt;
  grpc::ClientContext ctx;
  ASSERT_TRUE(f->stub->Detokenize(&ctx, dr, &dt).ok());
  EXPECT_EQ(dt.text(), tok.prompt());
}

TEST(GrpcText, StopStringEndsTheStreamWithoutItsText) {
  auto f = start();
  v1::GenerateRequest req = greedy(60);
  req.set_prompt_text("hello");
  const Result full = generate(*f->stub, req);
  ASSERT_TRUE(full.status.ok());
  ASSERT_GT(full.text.size(), 12u) << "the tiny model's greedy text is too short for this test";
  // A stop string from the middle of the text (often split across tokens): cut there.
  size_t at = full.text.size() / 2;
  while (at < full.text.size() && (static_cast<unsigned char>(full.text[at]) & 0xC0) == 0x80) ++at;
  std::string stop = full.text.substr(at, 3);
  while (!stop.empty() && (static_cast<unsigned char>(stop.back()) & 0x80)) stop.pop_back();  // whole characters
  if (stop.empty()) stop = full.text.substr(at, 1);
  req.mutable_sampling()->add_stop(stop);
  const Result cut = generate(*f->stub, req);
  ASSERT_TRUE(cut.status.ok()) << cut.status.error_message();
  EXPECT_EQ(cut.text, full.text.substr(0, full.text.find(stop)));
  EXPECT_EQ(cut.last.finish_reason(), v1::FINISH_REASON_STOP);
  EXPECT_LT(cut.ids.size(), full.ids.size());
  EXPECT_EQ(cut.last.usage().completion_tokens(), static_cast<int>(cut.ids.size()));
  EXPECT_GT(cut.last.timings().elapsed_s(), 0.0);
  EXPECT_GT(cut.last.timings().time_to_first_token_s(), 0.0);
  EXPECT_TRUE(std::equal(cut.ids.begin(), cut.ids.end(), full.ids.begin()));
}

TEST(GrpcText, BadTextIsInvalidArgument) {
  auto f = start();
  auto code = [&](const v1::GenerateRequest& r) { return generate(*f->stub, r).status.error_code(); };
  v1::GenerateRequest r = greedy(4);
  r.set_prompt_text("bad \xff\xfe utf-8");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = greedy(4);
  auto* m = r.add_messages();
  m->set_role("wizard");
  m->set_content("hi");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = greedy(4);
  m = r.add_messages();
  m->set_role("user");
  m->set_content("\xc3");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = greedy(4);  // no prompt at all
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = greedy(4);  // two prompts
  r.set_prompt_text("hello");
  r.add_prompt_token_ids(5);
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  r = greedy(4);
  r.set_prompt_text("hello");
  r.mutable_sampling()->add_stop("");
  EXPECT_EQ(code(r), grpc::StatusCode::INVALID_ARGUMENT);
  v1::DetokenizeRequest dr;
  dr.add_token_ids(100000);
  v1::DetokenizeResponse dt;
  grpc::ClientContext ctx;
  EXPECT_EQ(f->stub->Detokenize(&ctx, dr, &dt).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  // The server is fine afterwards.
  r = greedy(4);
  r.set_prompt_text("hello");
  EXPECT_TRUE(generate(*f->stub, r).status.ok());
}

TEST(GrpcText, ModelInfoNamesTokenizerAndTemplate) {
  auto f = start();
  grpc::ClientContext ctx;
  v1::ModelInfo mi;
  ASSERT_TRUE(f->stub->GetModelInfo(&ctx, {}, &mi).ok());
  EXPECT_NE(mi.tokenizer().find("263 tokens"), std::string::npos) << mi.tokenizer();
  EXPECT_EQ(mi.chat_template(), kChatML);
  EXPECT_EQ(mi.chat_template_source(), "test");
}

}  // namespace
}  // namespace flashserve::server
