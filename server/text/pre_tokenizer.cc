#include "server/text/pre_tokenizer.h"

#include <algorithm>

namespace flashserve::text {

const char kGpt2Pattern[] = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
const char kLlama3Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
const char kQwen2Pattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

Status parse_split_behavior(std::string_view name, SplitBehavior* out) {
  if (name == "Removed") *out = SplitBehavior::kRemoved;
  else if (name == "Isolated") *out = SplitBehavior::kIsolated;
  else if (name == "MergedWithPrevious") *out = SplitBehavior::kMergedWithPrevious;
  else if (name == "MergedWithNext") *out = SplitBehavior::kMergedWithNext;
  else if (name == "Contiguous") *out = SplitBehavior::kContiguous;
  else return unsupported("pre-tokenizer Split: unknown behavior '" + std::string(name) + "'");
  return Status::Ok();
}

Status PreTokenizer::add_split(std::string_view pattern, bool is_regex, SplitBehavior behavior, bool invert) {
  Step step;
  FS_RETURN_IF_ERROR(is_regex ? Regex::compile(pattern, &step.regex) : Regex::literal(pattern, &step.regex));
  step.behavior = behavior;
  step.invert = invert;
  steps_.push_back(std::move(step));
  return Status::Ok();
}

Status PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  Step step;
  step.add_prefix_space = add_prefix_space;
  if (use_regex) {
    // One compiled GPT-2 regex for every tokenizer in the process.
    static std::shared_ptr<const Regex> gpt2;
    static Status gpt2_status = Regex::compile(kGpt2Pattern, &gpt2);
    FS_RETURN_IF_ERROR(gpt2_status);
    step.regex = gpt2;
  }
  steps_.push_back(std::move(step));
  return Status::Ok();
}

Status PreTokenizer::add_digits(bool individual_digits) {
  // Rust's char::is_numeric is the general categories Nd, Nl and No: \p{N}.
  return individual_digits ? add_split(R"(\p{N})", true, SplitBehavior::kIsolated, false)
                           : add_split(R"(\p{N}+)", true, SplitBehavior::kIsolated, false);
}

void PreTokenizer::apply_prefix_space(Pieces* p) {
  const std::string_view text = p->text();
  bool needed = false;
  for (const auto& r : p->ranges_) needed |= text[r.first] != ' ';
  if (!needed) return;
  p->next_buffer_.clear();
  p->next_.clear();
  for (const auto& r : p->ranges_) {
    const uint32_t begin = static_cast<uint32_t>(p->next_buffer_.size());
    if (text[r.first] != ' ') p->next_buffer_.push_back(' ');
    p->next_buffer_.append(text.substr(r.first, r.second - r.first));
    p->next_.emplace_back(begin, static_cast<uint32_t>(p->next_buffer_.size()));
  }
  p->buffer_.swap(p->next_buffer_);
  p->ranges_.swap(p->next_);
  p->owned_ = true;
}

Status PreTokenizer::apply_split(const Step& step, Pieces* p) const {
  const std::string_view text = p->text();
  p->next_.clear();
  auto& seg = p->segments_;
  for (const auto& r : p->ranges_) {
    const std::string_view piece = text.substr(r.first, r.second - r.first);
    // The piece as (range, is_match) segments that cover it, as HF's find_matches gives them.
    seg.clear();
    size_t prev = 0, pos = 0;
    while (pos <= piece.size()) {
      size_t b = 0, e = 0;
      bool found = false;
      FS_RETURN_IF_ERROR(step.regex->find(piece, pos, &b, &e, &found));
      if (!found) break;
      if (e == b) {  // an empty match cuts nothing; go on one character later
        if (b >= piece.size()) break;
        pos = b + 1;
        while (pos < piece.size() && (static_cast<uint8_t>(piece[pos]) & 0xC0) == 0x80) ++pos;
        continue;
      }
      if (b != prev) seg.push_back({{r.first + static_cast<uint32_t>(prev), r.first + static_cast<uint32_t>(b)}, false});
      seg.push_back({{r.first + static_cast<uint32_t>(b), r.first + static_cast<uint32_t>(e)}, true});
      prev = pos = e;
    }
    if (prev != piece.size()) seg.push_back({{r.first + static_cast<uint32_t>(prev), r.second}, false});
    if (step.invert) {
      for (auto& s : seg) s.second = !s.second;
    }
    // The behavior, as HF's NormalizedString::split folds the segments.
    const size_t first_out = p->next_.size();
    bool previous_match = false;
    for (const auto& [range, is_match] : seg) {
      switch (step.behavior) {
        case SplitBehavior::kIsolated: p->next_.push_back(range); break;
        case SplitBehavior::kRemoved:
          if (!is_match) p->next_.push_back(range);
          break;
        case SplitBehavior::kMergedWithPrevious:
          if (is_match && !previous_match && p->next_.size() > first_out) p->next_.back().second = range.second;
          else p->next_.push_back(range);
          break;
        case SplitBehavior::kContiguous:
          if (is_match == previous_match && p->next_.size() > first_out) p->next_.back().second = range.second;
          else p->next_.push_back(range);
          break;
        case SplitBehavior::kMergedWithNext: break;  // below, from the right
      }
      previous_match = is_match;
    }
    if (step.behavior == SplitBehavior::kMergedWithNext) {
      previous_match = false;
      for (size_t i = seg.size(); i-- > 0;) {
        const auto& [range, is_match] = seg[i];
        if (is_match && !previous_match && p->next_.size() > first_out) p->next_.back().first = range.first;
        else p->next_.push_back(range);
        previous_match = is_match;
      }
      std::reverse(p->next_.begin() + static_cast<std::ptrdiff_t>(first_out), p->next_.end());
    }
  }
  p->ranges_.swap(p->next_);
  return Status::Ok();
}

Status PreTokenizer::split(std::string_view text, Pieces* p) const {
  p->input_ = text;
  p->owned_ = false;
  p->ranges_.clear();
  if (text.empty()) return Status::Ok();
  p->ranges_.emplace_back(0, static_cast<uint32_t>(text.size()));
  for (const Step& step : steps_) {
    if (step.add_prefix_space) apply_prefix_space(p);
    if (step.regex) FS_RETURN_IF_ERROR(apply_split(step, p));
    // Empty pieces are dropped (HF's PreTokenizedString::split keeps no empty split).
    auto& r = p->ranges_;
    r.erase(std::remove_if(r.begin(), r.end(), [](const auto& x) { return x.first == x.second; }), r.end());
  }
  return Status::Ok();
}

Status pre_tokenizer_for_gguf(std::string_view pre, PreTokenizer* out, bool* ignore_merges) {
  *out = PreTokenizer();
  *ignore_merges = false;
  if (pre == "gpt-2" || pre == "gpt2") return out->add_byte_level(false, true);
  if (pre == "llama-bpe" || pre == "llama3") {
    *ignore_merges = true;
    return out->add_split(kLlama3Pattern, true, SplitBehavior::kIsolated, false);
  }
  if (pre == "qwen2") return out->add_split(kQwen2Pattern, true, SplitBehavior::kIsolated, false);
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell") {
    FS_RETURN_IF_ERROR(out->add_digits(true));
    return out->add_byte_level(false, true);
  }
  if (pre == "default") {  // llama.cpp's list for a BPE tokenizer it does not know by name
    FS_RETURN_IF_ERROR(out->add_split(R"([\p{P}\$\+<=>\^~\|]+)", true, SplitBehavior::kIsolated, false));
    FS_RETURN_IF_ERROR(out->add_byte_level(false, true));
    FS_RETURN_IF_ERROR(out->add_split(R"(\p{N}+)", true, SplitBehavior::kIsolated, false));
    return out->add_split("[0-9][0-9][0-9]", true, SplitBehavior::kIsolated, false);
  }
  return unsupported("tokenizer.ggml.pre '" + std::string(pre) +
                     "' is not a pre-tokenizer this build knows (gpt-2, llama-bpe, qwen2, smollm, starcoder, default)");
}

}  // namespace flashserve::text
