#include "server/text/detokenizer.h"

namespace flashserve::text {

Status StreamingDetokenizer::add(int32_t id, std::string* delta) {
  if (!tokenizer_->valid_id(id)) {
    return out_of_range("detokenizer: id " + std::to_string(id) + " is not in the vocabulary of " +
                        std::to_string(tokenizer_->vocab_size()));
  }
  if (skip_special_tokens_ && tokenizer_->is_special(id)) return Status::Ok();
  decoder_.feed(tokenizer_->piece_unchecked(id), delta);
  return Status::Ok();
}

void StreamingDetokenizer::finish(std::string* delta) { decoder_.finish(delta); }

}  // namespace flashserve::text
