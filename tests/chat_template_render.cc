// chat_template_render: renders chat-template cases given as JSON lines on stdin, one result a
// line on stdout, for tests/chat_template_jinja2.py (which renders the same cases with Python's
// jinja2 and compares). A case:
//   {"id": "...", "template": "...", "messages": [...], "add_generation_prompt": bool,
//    "bos_token": "...", "eos_token": "...", "extra": {...}, "now_unix": N}
// Messages that are all {"role", "content"} strings go through ChatTemplate::render (the path the
// server takes); others through render_json. A result: {"id", "ok": true, "out"} or
// {"id", "ok": false, "error", "code"}.
#include <iostream>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "server/text/chat_template.h"

using flashserve::ChatMessage;
using flashserve::ChatTemplate;
using flashserve::RenderOptions;
using flashserve::Status;
using Json = nlohmann::ordered_json;

static bool plain_messages(const Json& messages, std::vector<ChatMessage>* out) {
  for (const auto& m : messages) {
    if (!m.is_object() || m.size() != 2 || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
        !m["content"].is_string()) {
      return false;
    }
    out->push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return true;
}

int main() {
  std::map<std::string, ChatTemplate> parsed;
  std::map<std::string, Status> parse_errors;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.empty()) continue;
    const Json c = Json::parse(line);
    Json result;
    result["id"] = c.value("id", "");
    const std::string source = c.at("template").get<std::string>();
    if (!parsed.count(source) && !parse_errors.count(source)) {
      ChatTemplate t;
      Status s = ChatTemplate::parse(source, &t);
      if (s.ok()) {
        parsed.emplace(source, std::move(t));
      } else {
        parse_errors.emplace(source, s);
      }
    }
    Status s;
    std::string out;
    if (auto it = parse_errors.find(source); it != parse_errors.end()) {
      s = it->second;
    } else {
      RenderOptions opts;
      opts.add_generation_prompt = c.value("add_generation_prompt", false);
      opts.bos_token = c.value("bos_token", "");
      opts.eos_token = c.value("eos_token", "");
      if (c.contains("extra")) opts.extra_vars = c["extra"];
      opts.now_unix = c.value("now_unix", static_cast<int64_t>(-1));
      const Json& messages = c.at("messages");
      std::vector<ChatMessage> plain;
      const ChatTemplate& t = parsed.at(source);
      s = plain_messages(messages, &plain) ? t.render(plain, opts, &out) : t.render_json(messages, opts, &out);
    }
    result["ok"] = s.ok();
    if (s.ok()) {
      result["out"] = out;
    } else {
      result["error"] = s.message();
      result["code"] = flashserve::status_code_name(s.code());
    }
    std::cout << result.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
  }
  return 0;
}
