// flashserve_cli: sends one prompt and prints what streams back: the text as it comes (with a
// text prompt or a chat message), or the token ids (with --tokens, or --show-ids).
// Usage: flashserve_cli --target 127.0.0.1:50051 (--tokens 1,2,3 | --prompt TEXT | --chat MESSAGE
//        [--system TEXT]) [--max-tokens 16] [--temperature 0] [--stop S]... [--auth-token T]
//        [--info] [--connect-timeout 10]
#include <grpcpp/grpcpp.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "client/grpc_connect.h"
#include "flashserve/v1/generation.grpc.pb.h"

int main(int argc, char** argv) {
  CLI::App app{"flashserve_cli: one generation over gRPC"};
  std::string target = "127.0.0.1:50051", tokens = "1,2,3", token;
  int max_tokens = 16;
  float temperature = 0.f;
  bool info = false, show_ids = false, ignore_eos = false;
  std::string prompt, chat, system;
  std::vector<std::string> stop;
  app.add_option("--target", target, "host:port")->envname("FLASHSERVE_TARGET");
  auto* tokens_opt = app.add_option("--tokens", tokens, "prompt token ids, comma separated");
  auto* prompt_opt = app.add_option("--prompt", prompt, "a text prompt (tokenized by the server)");
  auto* chat_opt = app.add_option("--chat", chat, "a user message, through the model's chat template");
  app.add_option("--system", system, "a system message before --chat")->needs(chat_opt);
  tokens_opt->excludes(prompt_opt)->excludes(chat_opt);
  prompt_opt->excludes(chat_opt);
  app.add_option("--stop", stop, "stop string (repeatable)");
  app.add_flag("--show-ids", show_ids, "print the token ids beside the text");
  app.add_option("--max-tokens", max_tokens);
  app.add_option("--temperature", temperature);
  app.add_flag("--ignore-eos", ignore_eos, "generate past the model's eos (to max-tokens)");
  app.add_option("--auth-token", token)->envname("FLASHSERVE_AUTH_TOKEN");
  app.add_flag("--info", info, "print the model and server info instead");
  double connect_timeout_s = 10;
  app.add_option("--connect-timeout", connect_timeout_s, "seconds to wait for the connection (none: exit 1)")
      ->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  if (std::string error; !flashserve::client::wait_connected(channel, target, connect_timeout_s, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 1;
  }
  auto stub = flashserve::v1::Generation::NewStub(channel);
  grpc::ClientContext ctx;
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  if (info) {
    flashserve::v1::ModelInfo mi;
    const grpc::Status s = stub->GetModelInfo(&ctx, {}, &mi);
    if (!s.ok()) {
      std::fprintf(stderr, "error %d: %s\n", s.error_code(), s.error_message().c_str());
      return 1;
    }
    std::printf("%s\n", mi.DebugString().c_str());
    return 0;
  }
  flashserve::v1::GenerateRequest req;
  const bool text = !prompt.empty() || !chat.empty();
  if (!prompt.empty()) {
    req.set_prompt_text(prompt);
  } else if (!chat.empty()) {
    if (!system.empty()) {
      auto* m = req.add_messages();
      m->set_role("system");
      m->set_content(system);
    }
    auto* m = req.add_messages();
    m->set_role("user");
    m->set_content(chat);
  } else {
    std::stringstream ss(tokens);
    for (std::string t; std::getline(ss, t, ',');) {
      try {
        req.add_prompt_token_ids(std::stoi(t));
      } catch (const std::exception&) {
        std::fprintf(stderr, "--tokens: '%s' is not a token id\n", t.c_str());
        return 2;
      }
    }
  }
  for (const auto& s : stop) req.mutable_sampling()->add_stop(s);
  req.mutable_sampling()->set_max_tokens(max_tokens);
  req.mutable_sampling()->set_temperature(temperature);
  req.mutable_sampling()->set_ignore_eos(ignore_eos);
  auto reader = stub->Generate(&ctx, req);
  flashserve::v1::GenerateResponse resp;
  while (reader->Read(&resp)) {
    if (text) std::fwrite(resp.text().data(), 1, resp.text().size(), stdout);
    if (!text || show_ids)
      for (int t : resp.token_ids()) std::printf(text ? " [%d]" : "%d ", t);
    std::fflush(stdout);
    if (resp.finished())
      std::printf("\n[%s] %d prompt, %d completion tokens, ttft %.3f s, total %.3f s, %d prompt tokens cached\n",
                  flashserve::v1::FinishReason_Name(resp.finish_reason()).c_str(), resp.usage().prompt_tokens(),
                  resp.usage().completion_tokens(), resp.timings().time_to_first_token_s(), resp.timings().elapsed_s(),
                  resp.usage().cached_tokens());
  }
  const grpc::Status s = reader->Finish();
  if (!s.ok()) {
    std::fprintf(stderr, "error %d: %s\n", s.error_code(), s.error_message().c_str());
    return 1;
  }
  return 0;
}
