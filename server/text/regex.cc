#include "server/text/regex.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

namespace flashserve::text {
namespace {

// Per-thread match state, shared by every Regex: the ovector is big enough for any pattern
// these pre-tokenizers use (PCRE2 reports rc 0 for a match whose groups do not all fit, and
// we only read group 0). The JIT stack grows to 8 MiB for long runs (a megabyte of spaces).
struct ThreadMatchState {
  pcre2_match_data* match_data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  ThreadMatchState() {
    match_data = pcre2_match_data_create(32, nullptr);
    context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && jit_stack) pcre2_jit_stack_assign(context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(match_data);
    pcre2_match_context_free(context);
    pcre2_jit_stack_free(jit_stack);
  }
};

ThreadMatchState& thread_state() {
  thread_local ThreadMatchState state;
  return state;
}

std::string pcre2_message(int code) {
  PCRE2_UCHAR buf[256];
  if (pcre2_get_error_message(code, buf, sizeof(buf)) < 0) return "error " + std::to_string(code);
  return reinterpret_cast<const char*>(buf);
}

}  // namespace

// Unicode White_Space, what Oniguruma's \s matches. PCRE2's \s with UCP differs: it matches
// U+180E (MONGOLIAN VOWEL SEPARATOR, a space before Unicode 6.3, kept in Perl's \h) too.
constexpr char kWhiteSpaceMembers[] = R"(\t-\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000})";

std::string translate_onig_pattern(std::string_view p) {
  std::string out;
  out.reserve(p.size() + 64);
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      const char e = p[i + 1];
      ++i;
      if (e == 's') {
        out += in_class ? std::string(kWhiteSpaceMembers) : "[" + std::string(kWhiteSpaceMembers) + "]";
      } else if (e == 'S' && !in_class) {
        out += "[^" + std::string(kWhiteSpaceMembers) + "]";
      } else {  // \S inside a class has no member list: left to PCRE2 (no tokenizer here uses it)
        out += '\\';
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' (or '^]') right after the opening bracket is a literal.
      if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
      if (i + 1 < p.size() && p[i + 1] == ']') out += p[++i];
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

namespace {
Status compile_raw(const std::string& pcre_pattern, const std::string& shown, uint32_t extra_options,
                   void** code_slot, bool* jit_slot);
}  // namespace

Status Regex::compile(std::string_view pattern, std::shared_ptr<const Regex>* out) {
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(pattern);
  FS_RETURN_IF_ERROR(compile_raw(translate_onig_pattern(pattern), re->pattern_, 0, &re->code_, &re->jit_));
  *out = std::move(re);
  return Status::Ok();
}

Status Regex::literal(std::string_view literal, std::shared_ptr<const Regex>* out) {
  std::shared_ptr<Regex> re(new Regex());
  re->pattern_ = std::string(literal);
  FS_RETURN_IF_ERROR(compile_raw(re->pattern_, re->pattern_, PCRE2_LITERAL, &re->code_, &re->jit_));
  *out = std::move(re);
  return Status::Ok();
}

namespace {
Status compile_raw(const std::string& pcre_pattern, const std::string& shown, uint32_t extra_options,
                   void** code_slot, bool* jit_slot) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pcre_pattern.data()), pcre_pattern.size(),
                                   PCRE2_UTF | extra_options | ((extra_options & PCRE2_LITERAL) ? 0 : PCRE2_UCP),  // LITERAL refuses UCP
                                   &error, &offset, nullptr);
  if (code == nullptr) {
    return invalid_argument("pre-tokenizer regex '" + shown + "': " + pcre2_message(error) + " at offset " +
                            std::to_string(offset));
  }
  *code_slot = code;
  // JIT is an optimisation: a PCRE2 built without it still matches, through the interpreter.
  *jit_slot = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  return Status::Ok();
}
}  // namespace

Regex::~Regex() { pcre2_code_free(static_cast<pcre2_code*>(code_)); }

Status Regex::find(std::string_view subject, size_t start, size_t* begin, size_t* end, bool* found) const {
  ThreadMatchState& st = thread_state();
  if (st.match_data == nullptr) return internal_error("pcre2: out of memory for match data");
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
  // The tokenizer validates its input as UTF-8 once; PCRE2 need not check it again per match.
  const int rc = jit_ ? pcre2_jit_match(code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, st.match_data, st.context)
                      : pcre2_match(code, s, subject.size(), start, PCRE2_NO_UTF_CHECK, st.match_data, st.context);
  if (rc == PCRE2_ERROR_NOMATCH) {
    *found = false;
    return Status::Ok();
  }
  if (rc < 0) return internal_error("pre-tokenizer regex '" + pattern_ + "': " + pcre2_message(rc));
  const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(st.match_data);
  *begin = ov[0];
  *end = ov[1];
  *found = true;
  return Status::Ok();
}

}  // namespace flashserve::text
