// Chat templates (server/text/chat_template.h): the Jinja2 subset, whitespace control as
// transformers renders it, Undefined, errors and limits, the outputs Python's jinja2 gave for
// every stored case (expected.jsonl, written by tests/chat_template_jinja2.py), and inputs that
// must never crash (random, truncated and mutated templates).
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server/text/chat_template.h"

namespace flashserve {
namespace {

using Json = nlohmann::ordered_json;

const std::string kData = FLASHSERVE_CHAT_TEMPLATE_DATA;

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Renders `source` with `messages`; the output, or "ERROR <code>: <message>".
std::string render(const std::string& source, const std::vector<ChatMessage>& messages = {},
                   const RenderOptions& opts = {}) {
  ChatTemplate t;
  Status s = ChatTemplate::parse(source, &t);
  if (!s.ok()) return "ERROR " + s.to_string();
  std::string out;
  s = t.render(messages, opts, &out);
  if (!s.ok()) return "ERROR " + s.to_string();
  return out;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

const std::vector<ChatMessage> kChat = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."},
                                        {"user", "Bye"}};

// ---- the language ----------------------------------------------------------------------------

struct Case {
  const char* source;
  const char* expected;
};

void expect_cases(const std::vector<Case>& cases, const std::vector<ChatMessage>& messages = kChat) {
  for (const Case& c : cases) EXPECT_EQ(render(c.source, messages), c.expected) << "template: " << c.source;
}

TEST(ChatTemplate, WhitespaceControlAsTransformers) {
  // trim_blocks drops the newline after %} and #}, lstrip_blocks the indentation before {% and
  // {#; neither touches {{ }}; - strips all whitespace, + keeps it; one trailing newline goes.
  expect_cases({
      {"a\n{% if true %}\nb\n{% endif %}\nc\n", "a\nb\nc"},
      {"  {% if true %}x{% endif %}\n  {{ 'y' }}\n", "x  y"},
      {"a  {{- ' b ' -}}  c", "a b c"},
      {"x {%+ if true %} y {% endif +%}\nz", "x  y \nz"},
      {"{# c #}\n  {#- d -#}  A", "A"},
      {"l1\n    {% set x = 1 %}\n    {{ x }}\n", "l1\n    1"},
      {"\r\nwin\r\n{% if true %}\r\nX\r\n{% endif %}\r", "\nwin\nX\n"},
      {"A{% raw %}\n {{ x }} {% y %}{% endraw %}B", "A\n {{ x }} {% y %}B"},
      {"{%- for m in messages -%}\n  [{{ m.role }}]\n{%- endfor %}", "[system][user][assistant][user]"},
      {"}} %} #} { {{ '{' }} }", "}} %} #} { { }"},
  });
}

TEST(ChatTemplate, LoopsAndScopes) {
  expect_cases({
      {"{% for m in messages %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }} "
       "{% endfor %}",
       "10TrueFalse4 21FalseFalse4 32FalseFalse4 43FalseTrue4 "},
      {"{% for x in [] %}no{% else %}empty{% endfor %}", "empty"},
      {"{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=2;"},
      {"{% for x in range(10) if x is odd %}{{ x }}{% endfor %}", "13579"},
      {"{% for i in range(9) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}"
       "{% endfor %}",
       "0134"},
      // An assignment inside a loop iteration is local to it; a namespace carries state out.
      {"{% set x = 5 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i %}{{ x }}{% endfor %}{{ x }}", "[5]1[5]25"},
      {"{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m.content|length %}{% endfor %}"
       "{{ ns.n }}",
       "20"},
      {"{% if true %}{% set y = 3 %}{% endif %}{{ y }}", "3"},
      {"{% set a, b = 1, 2 %}{{ a }}{{ b }}", "12"},
      {"{% macro g(n, p='!') %}Hi {{ n }}{{ p }}{% endmacro %}{{ g('A') }} {{ g('B', p='?') }}", "Hi A! Hi B?"},
      {"{% set s %}cap {{ 1 + 1 }}{% endset %}[{{ s }}]", "[cap 2]"},
  });
}

TEST(ChatTemplate, ExpressionsFollowPython) {
  expect_cases({
      {"{{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 6 / 2 }} {{ 2 ** 10 }}", "3 -4 2 3.5 3.0 1024"},
      {"{{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e15 }} {{ 0.00001 }} {{ 1.0 }}", "0.30000000000000004 1e+16 1000000000000000.0 1e-05 1.0"},
      {"{{ 1 and 2 }} {{ 0 or 'x' }} {{ none }} {{ true }} {{ 1 == 1.0 }}", "2 x None True True"},
      {"{{ [1, 'a', none] }} {{ {'q': \"it's\"} }} {{ (1,) }}", "[1, 'a', None] {'q': \"it's\"} (1,)"},
      {"{{ 'hello'[1:] }} {{ 'hello'[::-1] }} {{ 'h\xc3\xa9llo'[1] }} {{ messages[1:]|length }} {{ messages[-1].content }}",
       "ello olleh \xc3\xa9 3 Bye"},
      {"{{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 2 in [1, 2] }} {{ 'z' not in 'cat' }}", "a1None abab [1, 2] True True"},
      {"{{ 'yes' if messages else 'no' }} {{ 'x' if false }}|", "yes |"},
      {"{{ 1 < 2 < 3 }} {{ [1, 2] < [1, 3] }}", "True True"},
  });
}

TEST(ChatTemplate, FiltersTestsAndMethods) {
  expect_cases({
      {"{{ '  x  '|trim }}|{{ 'abc'|upper }}|{{ 'hello world'|capitalize }}|{{ [3, 1]|first }}{{ [3, 1]|last }}", "x|ABC|Hello world|31"},
      {"{{ [1, 2]|join(', ') }} {{ 'aaa'|replace('a', 'b', 2) }} {{ x|default('d') }} {{ messages|length }}", "1, 2 bba d 4"},
      {"{{ {'b': 1, 'a': ['\xc3\xa9', none, true, 2.5]}|tojson }}", "{\"b\": 1, \"a\": [\"\xc3\xa9\", null, true, 2.5]}"},
      {"{{ {'a': [1]}|tojson(indent=2) }}", "{\n  \"a\": [\n    1\n  ]\n}"},
      {"{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join('+') }}", "Hi+Bye"},
      {"{{ x is defined }} {{ none is none }} {{ 'a' is string }} {{ 3 is odd }} {{ {} is mapping }}", "False True True True True"},
      {"{{ ' a b '.strip() }}|{{ 'a,b'.split(',') }}|{{ 'ab'.startswith('a') }}|{{ 'ab'.endswith('a') }}", "a b|['a', 'b']|True|False"},
      {"{{ 'x</think>y'.split('</think>')[-1] }} {{ {'a': 1}.get('b', 0) }} {{ '\\n\\nhi\\n'.strip('\\n') }}", "y 0 hi"},
  });
}

TEST(ChatTemplate, UndefinedIsJinjasDefault) {
  expect_cases({
      {"[{{ nothing }}] {{ nothing is defined }} {{ nothing|length }} {{ not nothing }} {{ {'a': 1}.b }}|", "[] False 0 True |"},
      {"{% for x in nothing %}{{ x }}{% else %}none{% endfor %}", "none"},
  });
  EXPECT_TRUE(starts_with(render("{{ nothing.attr }}"), "ERROR INVALID_ARGUMENT")) << render("{{ nothing.attr }}");
  EXPECT_TRUE(starts_with(render("{{ nothing['k'] }}"), "ERROR INVALID_ARGUMENT"));
  EXPECT_TRUE(starts_with(render("{{ nothing + 1 }}"), "ERROR INVALID_ARGUMENT"));
  EXPECT_TRUE(starts_with(render("{{ [].append(1) }}"), "ERROR INVALID_ARGUMENT"));  // the sandbox's no
}

TEST(ChatTemplate, RaiseExceptionIsAnInvalidArgumentWithTheMessage) {
  const std::string mistral = read_file(kData + "/mistral_v01.jinja");
  ChatTemplate t;
  ASSERT_TRUE(ChatTemplate::parse(mistral, &t).ok());
  std::string out = "untouched";
  const Status s = t.render({{"user", "a"}, {"user", "b"}}, {}, &out);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
  EXPECT_EQ(out, "untouched");
  RenderOptions opts;
  opts.bos_token = "<s>";
  opts.eos_token = "</s>";
  ASSERT_TRUE(t.render({{"user", "a"}, {"assistant", "b"}, {"user", "c"}}, opts, &out).ok());
  EXPECT_EQ(out, "<s>[INST] a [/INST]b</s>[INST] c [/INST]");
}

TEST(ChatTemplate, ParseErrorsNameLineAndColumn) {
  ChatTemplate t;
  Status s = ChatTemplate::parse("line one\n{{ messages | }}", &t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(starts_with(s.message(), "chat template: line 2, column 15: ")) << s.message();
  s = ChatTemplate::parse("{% for m in messages %}\n\n{{ m }}", &t);
  EXPECT_TRUE(starts_with(s.message(), "chat template: line 3, ")) << s.message();
  EXPECT_NE(s.message().find("endfor"), std::string::npos) << s.message();
  s = ChatTemplate::parse("ok\n  {{ 'x' ! }}", &t);
  EXPECT_TRUE(starts_with(s.message(), "chat template: line 2, column 10: unexpected char '!'")) << s.message();
  EXPECT_TRUE(starts_with(render("{{ x | nosuchfilter }}"), "ERROR INVALID_ARGUMENT: chat template: line 1"));
  // Unknown filters inside an if only fail when reached, as in jinja2.
  EXPECT_EQ(render("{% if false %}{{ x | nosuchfilter }}{% endif %}ok"), "ok");
  // A render error names its line.
  EXPECT_EQ(render("a\n{{ 1 / 0 }}"), "ERROR INVALID_ARGUMENT: chat template: line 2: division by zero");
}

TEST(ChatTemplate, ExtraVariablesAndJsonMessages) {
  const std::string qwen3 = read_file(kData + "/qwen3.jinja");
  ChatTemplate t;
  ASSERT_TRUE(ChatTemplate::parse(qwen3, &t).ok());
  RenderOptions opts;
  opts.add_generation_prompt = true;
  opts.extra_vars = Json{{"enable_thinking", false}};
  std::string out;
  ASSERT_TRUE(t.render({{"user", "Hi"}}, opts, &out).ok());
  EXPECT_EQ(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
  const Json messages = Json::parse(R"([{"role": "user", "content": "Weather?"},
      {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "w", "arguments": {"city": "Paris"}}}]}])");
  ASSERT_TRUE(t.render_json(messages, {}, &out).ok());
  EXPECT_EQ(out,
            "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n"
            "{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call><|im_end|>\n");
  EXPECT_EQ(t.render_json(Json::object(), {}, &out).code(), StatusCode::kInvalidArgument);
}

TEST(ChatTemplate, StrftimeNowUsesTheGivenClock) {
  RenderOptions opts;
  opts.now_unix = 86400 * 365;  // 1971-01-01 in UTC; the date below holds in every time zone
  EXPECT_EQ(render("{{ strftime_now('%Y') }}", {}, opts).substr(0, 3), "197");
}

// ---- what Python's jinja2 rendered -----------------------------------------------------------

TEST(ChatTemplate, MatchesJinja2Golden) {
  const Json spec = Json::parse(read_file(kData + "/cases.json"));
  const Json snippets = Json::parse(read_file(kData + "/snippets.json"));
  std::ifstream golden(kData + "/expected.jsonl");
  ASSERT_TRUE(golden.good()) << "missing " << kData << "/expected.jsonl";
  std::map<std::string, ChatTemplate> parsed;
  std::string line;
  int identical = 0, both_failed = 0, mismatched = 0;
  while (std::getline(golden, line)) {
    const Json g = Json::parse(line);
    std::string source;
    Json messages;
    RenderOptions opts;
    opts.add_generation_prompt = g["add_generation_prompt"].get<bool>();
    opts.now_unix = spec["now_unix"].get<int64_t>();
    if (g.contains("snippet")) {
      const Json& s = snippets[g["snippet"].get<size_t>()];
      source = s["template"].get<std::string>();
      messages = s["messages"];
      opts.bos_token = "<s>";
      opts.eos_token = "</s>";
    } else {
      const std::string file = g["template_file"].get<std::string>();
      const Json& t = spec["templates"][file];
      source = read_file(kData + "/" + file);
      messages = spec["message_sets"][g["messages_set"].get<std::string>()];
      opts.bos_token = t["bos_token"].get<std::string>();
      opts.eos_token = t["eos_token"].get<std::string>();
      for (const Json& v : t["variants"]) {
        if (v["name"] == g["variant"] && v.contains("extra")) opts.extra_vars = v["extra"];
      }
    }
    std::string out;
    Status s;
    {
      ChatTemplate t;
      s = ChatTemplate::parse(source, &t);
      if (s.ok()) s = t.render_json(messages, opts, &out);
    }
    const bool expect_ok = g["ok"].get<bool>();
    if (expect_ok && s.ok() && out == g["out"].get<std::string>()) {
      ++identical;
    } else if (!expect_ok && !s.ok()) {
      ++both_failed;
    } else {
      ++mismatched;
      ADD_FAILURE() << g["id"].get<std::string>() << ": jinja2 "
                    << (expect_ok ? "rendered\n" + g["out"].get<std::string>() : "failed: " + g["error"].get<std::string>())
                    << "\nours " << (s.ok() ? "rendered\n" + out : "failed: " + s.to_string());
    }
  }
  std::printf("golden: %d byte-identical, %d fail in both, %d mismatched\n", identical, both_failed, mismatched);
  EXPECT_GT(identical, 500);
  EXPECT_EQ(mismatched, 0);
}

TEST(ChatTemplate, SmolLM2TemplateFromItsGguf) {
  // The model file ships the template under tokenizer.chat_template; the stored copy must be it.
  const char* dir = std::getenv("FLASHSERVE_MODEL_DIR");
  const char* home = std::getenv("HOME");
  const std::string path = (dir ? std::string(dir) : std::string(home ? home : "") + "/.cache/flashserve/models") +
                           "/SmolLM2-135M-Instruct.Q4_1.gguf";
  const std::string gguf = read_file(path);
  if (gguf.empty()) GTEST_SKIP() << "no " << path;
  const std::string stored = read_file(kData + "/smollm2.jinja");
  EXPECT_NE(gguf.find(stored), std::string::npos) << "the GGUF's tokenizer.chat_template differs from smollm2.jinja";
}

// ---- limits and hostile input ----------------------------------------------------------------

TEST(ChatTemplate, LimitsStopHostileTemplates) {
  auto code_of = [](const std::string& source, const RenderOptions& opts = {}) {
    ChatTemplate t;
    Status s = ChatTemplate::parse(source, &t);
    if (s.ok()) {
      std::string out;
      s = t.render({{"user", "hi"}}, opts, &out);
    }
    return s.code();
  };
  // Too many steps: ten billion iterations.
  EXPECT_EQ(code_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"),
            StatusCode::kResourceExhausted);
  // Output too long.
  RenderOptions small;
  small.max_output_bytes = 1000;
  EXPECT_EQ(code_of("{% for i in range(1000) %}xx{% endfor %}", small), StatusCode::kResourceExhausted);
  EXPECT_EQ(code_of("{% for i in range(100) %}xx{% endfor %}", small), StatusCode::kOk);
  // Memory: a string doubling in a namespace, a huge repetition, a huge range.
  EXPECT_EQ(code_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(code_of("{{ 'x' * 10000000000 }}"), StatusCode::kResourceExhausted);
  EXPECT_EQ(code_of("{{ [1] * 10000000000 }}"), StatusCode::kResourceExhausted);
  EXPECT_EQ(code_of("{{ range(1000000)|length }}"), StatusCode::kResourceExhausted);
  // Unbounded recursion.
  EXPECT_EQ(code_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"), StatusCode::kResourceExhausted);
  // Deep nesting fails to parse instead of overflowing the stack.
  for (const std::string& deep : {std::string(100000, '(') + "1" + std::string(100000, ')'),
                                  std::string(100000, '['), "{{ " + std::string(100000, '-') + "1 }}",
                                  "{{ 1" + [] {
                                    std::string s;
                                    for (int i = 0; i < 50000; ++i) s += " + 1";
                                    return s;
                                  }() + " }}",
                                  [] {
                                    std::string s;
                                    for (int i = 0; i < 10000; ++i) s += "{% if true %}";
                                    return s;
                                  }()}) {
    ChatTemplate t;
    const Status s = ChatTemplate::parse("{{ " + deep + " }}", &t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << deep.substr(0, 20);
  }
  // Integer overflow is an error, not undefined behaviour.
  EXPECT_EQ(code_of("{{ 9223372036854775807 + 1 }}"), StatusCode::kInvalidArgument);
  EXPECT_EQ(code_of("{{ 2 ** 64 }}"), StatusCode::kInvalidArgument);
  // Found by fuzz_chat_template: a namespace holding itself printed itself without end (a stack
  // overflow; the cycle also leaked). A namespace in a namespace is refused, however deep.
  for (const char* cyc : {"{% set ns = namespace(n=0) %}{% set ns.n = ns %}{{ ns.n }}",
                          "{% set ns = namespace(n=0) %}{% set ns.n = [1, {'a': ns}] %}{{ ns }}",
                          "{% set a = namespace(x=1) %}{% set b = namespace(y=a) %}{{ b }}"})
    EXPECT_EQ(code_of(cyc), StatusCode::kInvalidArgument) << cyc;
  EXPECT_EQ(code_of("{% set a = namespace(x=[1, 2]) %}{% set b = [a, a] %}{{ b|length }}{{ a.x }}"), StatusCode::kOk);
  // A list wrapped in itself a thousand times: refused at 128 levels, not printed (or freed) by
  // a recursion 1000 deep.
  EXPECT_EQ(code_of("{% set ns = namespace(x=[]) %}{% for i in range(1000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                    "{{ ns.x }}"),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(code_of("{% set ns = namespace(x=[]) %}{% for i in range(100) %}{% set ns.x = [ns.x] %}{% endfor %}"
                    "{{ ns.x|length }}"),
            StatusCode::kOk);
}

TEST(ChatTemplate, RobustToOddConversations) {
  const std::string llama31 = read_file(kData + "/llama31.jinja");
  ChatTemplate t;
  ASSERT_TRUE(ChatTemplate::parse(llama31, &t).ok());
  std::string out;
  // No messages: the template's messages[0]['role'] is an error, reported, not a crash.
  EXPECT_EQ(t.render({}, {}, &out).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(t.render({{"narrator", "x"}, {"", ""}, {std::string("\0\xff", 2), "\xc3"}}, {}, &out).ok());
  EXPECT_NE(out.find("<|start_header_id|>narrator<|end_header_id|>\n\nx<|eot_id|>"), std::string::npos);
  ChatTemplate unparsed;
  EXPECT_FALSE(unparsed.render({}, {}, &out).ok());
}

TEST(ChatTemplate, RendersOnManyThreadsAtOnce) {
  ChatTemplate t;
  ASSERT_TRUE(ChatTemplate::parse(read_file(kData + "/qwen3.jinja"), &t).ok());
  std::string expected;
  ASSERT_TRUE(t.render(kChat, {}, &expected).ok());
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) {
        std::string out;
        if (!t.render(kChat, {}, &out).ok() || out != expected) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

// Every prefix of every stored template, byte mutations of them, and random token soup: each
// parses or fails with a status, and each that parses renders or fails with a status.
TEST(ChatTemplate, FuzzNeverCrashes) {
  std::vector<std::string> sources;
  for (const char* name : {"llama31.jinja", "qwen3.jinja", "mistral_v03.jinja", "whitespace_control.jinja",
                           "smollm2.jinja", "zephyr.jinja"}) {
    sources.push_back(read_file(kData + "/" + name));
  }
  const Json snippets = Json::parse(read_file(kData + "/snippets.json"));
  for (const Json& s : snippets) sources.push_back(s["template"].get<std::string>());
  RenderOptions opts;
  opts.max_steps = 20000;
  opts.max_alloc_bytes = 1 << 20;
  std::vector<ChatMessage> messages = {{"system", "s"}, {"user", "u"}, {"assistant", "a"}, {"user", "\xff\xfe"}};
  int parsed = 0, rendered = 0, total = 0;
  auto attempt = [&](const std::string& src) {
    ++total;
    ChatTemplate t;
    if (!ChatTemplate::parse(src, &t).ok()) return;
    ++parsed;
    std::string out;
    if (t.render(messages, opts, &out).ok()) ++rendered;
  };
  for (const std::string& src : sources) {
    const size_t step = std::max<size_t>(1, src.size() / 300);
    for (size_t n = 0; n <= src.size(); n += step) attempt(src.substr(0, n));
  }
  std::mt19937 rng(20261201);  // fixed seed
  for (int round = 0; round < 3000; ++round) {
    std::string src = sources[rng() % sources.size()];
    if (src.empty()) continue;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % src.size();
      switch (rng() % 3) {
        case 0: src[pos] = static_cast<char>(rng() % 256); break;
        case 1: src.erase(pos, 1 + rng() % 8); break;
        default: {
          static const char kPunct[] = "{}%#-+()[]'\"|.~:,";
          src.insert(src.begin() + static_cast<std::ptrdiff_t>(pos), kPunct[rng() % (sizeof(kPunct) - 1)]);
          break;
        }
      }
      if (src.empty()) break;
    }
    attempt(src);
  }
  static const char* kPieces[] = {"{{", "}}", "{%", "%}", "{#", "#}", "-", "+", " ", "\n", "if", "for", "in", "else",
                                  "endif", "endfor", "set", "=", "x", "messages", "loop", ".", "[", "]", "(", ")",
                                  "'", "\"", "|", "trim", "is", "defined", "not", "and", "or", "1", "0.5", ",", ":",
                                  "~", "*", "**", "macro", "endmacro", "raw", "endraw", "namespace", "ns.x"};
  for (int round = 0; round < 3000; ++round) {
    std::string src;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) src += kPieces[rng() % (sizeof(kPieces) / sizeof(kPieces[0]))];
    attempt(src);
  }
  std::printf("fuzz: %d templates, %d parsed, %d rendered\n", total, parsed, rendered);
  EXPECT_GT(parsed, 100);  // the fuzz reaches the interpreter, not only the parser
  EXPECT_GT(rendered, 50);
}

}  // namespace
}  // namespace flashserve
