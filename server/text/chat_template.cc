#include "server/text/chat_template.h"

#include <new>

#include "server/text/jinja/ast.h"
#include "server/text/jinja/callable.h"
#include "server/text/jinja/interpreter.h"
#include "server/text/jinja/parser.h"

namespace flashserve {
namespace {

using jinja::TemplateError;
using jinja::Value;

constexpr int kMaxJsonDepth = 64;

Value from_json(const nlohmann::ordered_json& j, int depth) {
  if (depth > kMaxJsonDepth) throw TemplateError("template variable nested more than 64 levels deep", 0);
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return Value::none();
    case nlohmann::ordered_json::value_t::boolean: return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = j.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::number(static_cast<double>(u));
      return Value::integer(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float: return Value::number(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::ValueList items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json(item, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      jinja::ValueItems items;
      items.reserve(j.size());
      for (auto it = j.begin(); it != j.end(); ++it) {
        items.emplace_back(Value::string(it.key()), from_json(it.value(), depth + 1));
      }
      return Value::dict(std::move(items));
    }
    default: return Value::none();  // binary, discarded
  }
}

Value builtin(const char* name) {
  auto fn = std::make_shared<jinja::Callable>();
  fn->kind = jinja::Callable::Kind::kBuiltin;
  fn->name = name;
  return Value::callable(std::move(fn));
}

std::string where(const TemplateError& e) {
  if (e.line <= 0) return "chat template: ";
  if (e.column > 0) return "chat template: line " + std::to_string(e.line) + ", column " + std::to_string(e.column) + ": ";
  return "chat template: line " + std::to_string(e.line) + ": ";
}

}  // namespace

Status ChatTemplate::parse(std::string source, ChatTemplate* out) {
  if (out == nullptr) return invalid_argument("chat template: null output");
  try {
    auto body = std::make_shared<std::vector<jinja::Node>>(jinja::parse_template(source));
    out->source_ = std::move(source);
    out->body_ = std::move(body);
    return Status::Ok();
  } catch (const TemplateError& e) {
    return invalid_argument(where(e) + e.what());
  } catch (const std::bad_alloc&) {
    return resource_exhausted("chat template: out of memory while parsing");
  } catch (const std::exception& e) {
    return internal_error(std::string("chat template: ") + e.what());
  }
}

Status ChatTemplate::render(const std::vector<ChatMessage>& messages, const RenderOptions& opts,
                            std::string* out) const {
  jinja::ValueList list;
  list.reserve(messages.size());
  for (const ChatMessage& m : messages) {
    list.push_back(Value::dict({{Value::string("role"), Value::string(m.role)},
                                {Value::string("content"), Value::string(m.content)}}));
  }
  const Value v = Value::list(std::move(list));
  return render_value(v, opts, out);
}

Status ChatTemplate::render_json(const nlohmann::ordered_json& messages, const RenderOptions& opts,
                                 std::string* out) const {
  if (!messages.is_array()) return invalid_argument("chat template: messages must be a JSON array");
  try {
    const Value v = from_json(messages, 0);
    return render_value(v, opts, out);
  } catch (const TemplateError& e) {
    return invalid_argument(where(e) + e.what());
  }
}

Status ChatTemplate::render_value(const Value& messages, const RenderOptions& opts, std::string* out) const {
  if (out == nullptr) return invalid_argument("chat template: null output");
  if (body_ == nullptr) return invalid_argument("chat template: not parsed");
  if (!opts.extra_vars.is_object()) return invalid_argument("chat template: extra_vars must be a JSON object");
  try {
    jinja::Limits limits;
    limits.max_output_bytes = opts.max_output_bytes;
    limits.max_alloc_bytes = opts.max_alloc_bytes;
    limits.max_steps = opts.max_steps;
    jinja::Interpreter in(limits, opts.now_unix);
    for (const char* name : {"range", "namespace", "dict", "raise_exception", "strftime_now"}) {
      in.define(name, builtin(name));
    }
    in.define("messages", messages);
    in.define("add_generation_prompt", Value::boolean(opts.add_generation_prompt));
    in.define("bos_token", Value::string(opts.bos_token));
    in.define("eos_token", Value::string(opts.eos_token));
    in.define("tools", Value::none());
    in.define("documents", Value::none());
    for (auto it = opts.extra_vars.begin(); it != opts.extra_vars.end(); ++it) {
      in.define(it.key(), from_json(it.value(), 0));
    }
    *out = in.render(*body_);
    return Status::Ok();
  } catch (const TemplateError& e) {
    if (e.resource) return resource_exhausted(where(e) + e.what());
    return invalid_argument(where(e) + e.what());
  } catch (const std::bad_alloc&) {
    return resource_exhausted("chat template: out of memory while rendering");
  } catch (const std::exception& e) {
    return internal_error(std::string("chat template: ") + e.what());
  }
}

Status apply_chat_template(const std::string& template_source, const std::vector<ChatMessage>& messages,
                           const RenderOptions& opts, std::string* prompt) {
  ChatTemplate t;
  FS_RETURN_IF_ERROR(ChatTemplate::parse(template_source, &t));
  return t.render(messages, opts, prompt);
}

}  // namespace flashserve
