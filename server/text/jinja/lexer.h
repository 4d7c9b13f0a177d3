// The template lexer: Jinja2 3.1's tokenizer with the environment transformers renders chat
// templates in (trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, default
// delimiters). Whitespace control happens here, exactly as jinja2/lexer.py does it:
//  - newlines: \r\n and \r become \n, and one trailing newline of the source is dropped;
//  - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`, `-#}` all after;
//  - trim_blocks: one \n right after `%}` or `#}` is dropped (not after `+%}`, nor `}}`);
//  - lstrip_blocks: spaces and tabs from the start of a line up to `{%` or `{#` are dropped
//    (not before `{{`, not with `{%+`); "start of a line" also means the template's start or
//    right after a tag whose own match ended in a newline;
//  - `{% raw %}...{% endraw %}` is one data token (no trim after the opening tag, as jinja2).
// "Whitespace" is Python's str.isspace(), Unicode included.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace flashserve::jinja {

enum class TokenType {
  kData,
  kVariableBegin,
  kVariableEnd,
  kBlockBegin,
  kBlockEnd,
  kName,
  kString,   // value: the decoded literal
  kInteger,  // int_value
  kFloat,    // float_value
  kOperator,  // value: "+", "//", "(", ...
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string value;
  int64_t int_value = 0;
  double float_value = 0.0;
  int line = 1;
  int column = 1;
};

// Throws TemplateError (with line and column) on a lexical error: an unterminated comment or raw
// block, a character that starts no token, unbalanced brackets.
std::vector<Token> tokenize(std::string_view source);

}  // namespace flashserve::jinja
