// Chat templates (issue 23): a model's own chat template (GGUF `tokenizer.chat_template`, or
// `chat_template` in tokenizer_config.json) applied to a conversation, giving the prompt text
// that the tokenizer then encodes (special tokens such as <|im_start|> are matched inside it).
//
// The template language is the subset of Jinja2 that real chat templates use, interpreted as
// Hugging Face transformers renders them: jinja2's ImmutableSandboxedEnvironment with
// trim_blocks=True, lstrip_blocks=True and the loopcontrols extension, a `tojson` that does not
// escape HTML (ensure_ascii=False), and the globals raise_exception(msg) and strftime_now(fmt).
// Variables: messages (a list of {"role", "content"} dicts), add_generation_prompt, bos_token,
// eos_token, tools and documents (None), plus RenderOptions::extra_vars. See
// server/text/jinja/ for the lexer, parser and interpreter; tests/test_chat_template.cc and
// the ChatTemplate.MatchesJinja2 test compare it byte for byte with Python's jinja2.
//
// Parse once, render many: a parsed ChatTemplate is immutable and render() may run on many
// threads at once. Rendering is bounded (steps, nesting, bytes built, output size) so a hostile
// template cannot hang or exhaust memory; no input crashes it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace flashserve {

namespace jinja {
struct Node;
class Value;
}  // namespace jinja

struct ChatMessage {
  std::string role;     // "system", "user", "assistant", "tool", ... (passed through as is)
  std::string content;
};

struct RenderOptions {
  bool add_generation_prompt = false;  // end with the assistant header, ready to generate
  std::string bos_token;
  std::string eos_token;
  // More template variables, a JSON object: what transformers gets from the tokenizer's special
  // tokens map and from chat_template_kwargs (e.g. {"enable_thinking": false} for Qwen3, or
  // "date_string" for Llama 3.x). Overrides the variables above and the globals. Key order is
  // kept (ordered_json), as Python's dicts keep it for tojson.
  nlohmann::ordered_json extra_vars = nlohmann::ordered_json::object();
  // Limits (RESOURCE_EXHAUSTED when hit).
  size_t max_output_bytes = 16u << 20;  // the prompt
  size_t max_alloc_bytes = 256u << 20;  // all strings and lists the template builds, summed
  int64_t max_steps = 5'000'000;        // expression and statement evaluations
  // strftime_now's clock, seconds since the epoch (local time zone); < 0: the current time.
  int64_t now_unix = -1;
};

class ChatTemplate {
 public:
  ChatTemplate() = default;

  // Parses `source`. A syntax error is INVALID_ARGUMENT naming the line and column
  // ("chat template: line 3, column 14: unexpected '}'").
  static Status parse(std::string source, ChatTemplate* out);

  // Renders the conversation into *out. Errors are INVALID_ARGUMENT: the template's own
  // raise_exception ("chat template: Conversation roles must alternate user/assistant/...") or
  // a runtime error with its line ("chat template: line 5: 'dict object' has no attribute ...");
  // a hit limit is RESOURCE_EXHAUSTED. *out is left unchanged on error.
  Status render(const std::vector<ChatMessage>& messages, const RenderOptions& opts, std::string* out) const;

  // Same with messages as JSON (a list of objects with any fields: tool_calls, content parts).
  Status render_json(const nlohmann::ordered_json& messages, const RenderOptions& opts, std::string* out) const;

  bool empty() const { return body_ == nullptr; }
  const std::string& source() const { return source_; }

 private:
  Status render_value(const jinja::Value& messages, const RenderOptions& opts, std::string* out) const;

  std::string source_;
  std::shared_ptr<const std::vector<jinja::Node>> body_;
};

// The server's one call: the prompt text for a conversation (parse + render). Prefer parsing the
// model's template once at load and calling ChatTemplate::render per request.
Status apply_chat_template(const std::string& template_source, const std::vector<ChatMessage>& messages,
                           const RenderOptions& opts, std::string* prompt);

}  // namespace flashserve
