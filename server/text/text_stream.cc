#include "server/text/text_stream.h"

#include <algorithm>

#include "server/text/utf8.h"

namespace flashserve::text {

Status validate_stop_strings(const std::vector<std::string>& stop) {
  if (stop.size() > static_cast<size_t>(kMaxStopStrings))
    return invalid_argument("stop: at most " + std::to_string(kMaxStopStrings) + " stop strings, got " +
                            std::to_string(stop.size()));
  for (size_t i = 0; i < stop.size(); ++i) {
    if (stop[i].empty()) return invalid_argument("stop[" + std::to_string(i) + "] is empty");
    if (stop[i].size() > kMaxStopStringBytes)
      return invalid_argument("stop[" + std::to_string(i) + "] is longer than " + std::to_string(kMaxStopStringBytes) +
                              " bytes");
    if (!utf8_is_valid(stop[i])) return invalid_argument("stop[" + std::to_string(i) + "] is not valid UTF-8");
  }
  return Status::Ok();
}

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<std::string> stop, bool skip_special_tokens,
                       int64_t min_tokens)
    : tokenizer_(&tokenizer), detok_(tokenizer, skip_special_tokens), stop_(std::move(stop)), min_tokens_(min_tokens) {
  for (const auto& s : stop_) max_stop_ = std::max(max_stop_, s.size());
}

void TextStream::release(std::string* delta) {
  // Keep the longest suffix that is a proper prefix of some stop string; the rest is final.
  size_t keep = 0;
  for (const auto& s : stop_) {
    const size_t most = std::min(s.size() - 1, pending_.size());
    for (size_t k = most; k > keep; --k) {
      if (pending_.compare(pending_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  // The detokenizer only hands out whole characters, and a stop string is valid UTF-8, so the
  // cut falls on a character boundary.
  const size_t emit = pending_.size() - keep;
  delta->append(pending_, 0, emit);
  pending_.erase(0, emit);
}

Status TextStream::add(std::span<const int32_t> ids, std::string* delta, bool* stopped, size_t* used) {
  *stopped = stopped_;
  *used = 0;
  if (stopped_) return Status::Ok();
  std::string piece;
  for (size_t i = 0; i < ids.size(); ++i) {
    ++generated_;
    piece.clear();
    if (!tokenizer_->valid_id(ids[i])) continue;  // padded embeddings past the vocabulary: no text
    FS_RETURN_IF_ERROR(detok_.add(ids[i], &piece));
    if (piece.empty()) continue;
    // A stop string that completes now ends inside the new piece: search the window that can
    // hold it (the held text and the piece).
    const size_t from = pending_.size() >= max_stop_ ? pending_.size() - max_stop_ + 1 : 0;
    pending_ += piece;
    size_t best = std::string::npos;
    if (generated_ >= min_tokens_)  // before min_tokens a stop string is text like any other
      for (const auto& s : stop_) {
        const size_t at = pending_.find(s, from);
        if (at != std::string::npos) best = std::min(best, at);
      }
    if (best != std::string::npos) {
      delta->append(pending_, 0, best);
      pending_.clear();
      stopped_ = true;
      *stopped = true;
      *used = i + 1;
      return Status::Ok();
    }
    release(delta);
  }
  *used = ids.size();
  return Status::Ok();
}

void TextStream::finish(std::string* delta) {
  if (stopped_) return;
  std::string tail;
  detok_.finish(&tail);
  pending_ += tail;
  delta->append(pending_);
  pending_.clear();
}

}  // namespace flashserve::text
