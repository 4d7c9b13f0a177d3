// Fuzz target: the chat-template interpreter (server/text/chat_template.h) on untrusted template
// text: parse, then render a short conversation within the interpreter's limits (a template is
// model data, but a server takes it from files anyone may have written).
#include "server/text/chat_template.h"
#include "tests/fuzz/fuzz.h"

using namespace flashserve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ChatTemplate t;
  const bool ok = ChatTemplate::parse(std::string(reinterpret_cast<const char*>(data), size), &t).ok();
  fuzz::note(ok);
  if (!ok) return 0;
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi \xe2\x82\xac"}, {"assistant", "Hello."},
                                             {"user", "What is 2+2?"}};
  RenderOptions opts;
  opts.add_generation_prompt = true;
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  opts.max_output_bytes = 1u << 16;  // bounded work an input
  opts.max_alloc_bytes = 16u << 20;
  opts.max_steps = 200'000;
  std::string out;
  (void)t.render(messages, opts, &out);
  return 0;
}

namespace flashserve::fuzz {

std::vector<std::string> seeds() {
  return {
      // ChatML (SmolLM2's)
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
      "You are a helpful AI assistant<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' "
      "}}{% endif %}",
      // Llama-2 style, with raise_exception and filters
      "{{ bos_token }}{% for m in messages %}{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
      "raise_exception('roles must alternate') }}{% endif %}{% if m.role == 'user' %}{{ '[INST] ' + m.content | trim + "
      "' [/INST]' }}{% elif m.role == 'assistant' %}{{ ' ' + m.content | trim + eos_token }}{% endif %}{% endfor %}",
      // macros, set, namespace, slicing, tojson
      "{% macro fmt(r, c) %}<{{ r|upper }}>{{ c }}{% endmacro %}{% set ns = namespace(n=0) %}{% for m in messages[1:] "
      "%}{% set ns.n = ns.n + 1 %}{{ fmt(m.role, m.content) }}{{ ns.n }}{% endfor %}{{ messages|length }}{{ "
      "{'a': [1, 2.5, none, true]}|tojson }}",
  };
}

std::vector<std::string> dictionary() {
  return {"{%", "%}", "{{", "}}", "{#", "#}", " for ", " in ", " endfor ", " if ", " else ", " endif ", " set ",
          " macro ", " endmacro ", "messages", "loop.index", "|tojson", "|trim", "namespace(", "raise_exception(",
          "[", "]", "(", ")", "'", "\"", "~", "+", " * ", "9999999999", "range(", "-"};
}

}  // namespace flashserve::fuzz
