#include "server/text/tokenizer.h"

#include "server/text/byte_level.h"
#include "server/text/tokenizer_impl.h"
#include "server/text/utf8.h"

namespace flashserve::text {

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::~Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;

Status finish_tokenizer(TokenizerSpec spec, Tokenizer::Impl* out) {
  const int32_t n = static_cast<int32_t>(spec.tokens.size());
  spec.present.resize(n, 0);
  spec.in_model.resize(n, 0);
  auto check_id = [&](int32_t id, const char* what) -> Status {
    if (id < -1 || id >= n || (id >= 0 && !spec.present[id])) {
      return out_of_range(std::string(what) + " id " + std::to_string(id) + " is not in the vocabulary of " +
                          std::to_string(n));
    }
    return Status::Ok();
  };
  FS_RETURN_IF_ERROR(check_id(spec.bos, "bos"));
  FS_RETURN_IF_ERROR(check_id(spec.eos, "eos"));
  FS_RETURN_IF_ERROR(check_id(spec.pad, "padding"));
  FS_RETURN_IF_ERROR(check_id(spec.bpe.unk_id, "unk"));
  for (int32_t id : spec.prefix_ids) FS_RETURN_IF_ERROR(check_id(id, "post-processor"));
  for (int32_t id : spec.suffix_ids) FS_RETURN_IF_ERROR(check_id(id, "post-processor"));
  for (const AddedToken& t : spec.added) {
    if (t.id < 0 || t.id >= n) return out_of_range("added token '" + t.content + "' has id " + std::to_string(t.id));
    if (t.content.empty()) return invalid_argument("added token " + std::to_string(t.id) + " is empty");
  }

  Tokenizer::Impl impl;
  impl.pieces.resize(n);
  impl.flags.assign(n, 0);
  std::vector<std::pair<bool, std::string>> model_tokens(n);
  std::string bytes;
  for (int32_t id = 0; id < n; ++id) {
    if (!spec.present[id]) continue;
    impl.flags[id] = Tokenizer::Impl::kValid;
    // HF's ByteLevel decoder: a token of the byte-level alphabet is its bytes; any other token
    // (an added "<|im_start|>" is both) is its own UTF-8.
    const std::string& tok = spec.tokens[id];
    const bool byte_level = byte_level_to_bytes(tok, &bytes);
    impl.pieces[id] = byte_level ? bytes : tok;
    if (spec.in_model[id] && byte_level) model_tokens[id] = {true, bytes};
  }
  FS_RETURN_IF_ERROR(impl.bpe.init(model_tokens, spec.merges, spec.bpe));
  impl.token_ids.reserve(n + spec.added.size());
  for (int32_t id = 0; id < n; ++id) {
    if (spec.present[id]) impl.token_ids.emplace(spec.tokens[id], id);
  }
  std::vector<AddedToken> plain, normalized;
  for (const AddedToken& t : spec.added) {
    impl.token_ids[t.content] = t.id;
    if (t.special) impl.flags[t.id] |= Tokenizer::Impl::kSpecial;
    (t.normalized ? normalized : plain).push_back(t);
  }
  impl.plain_matcher.build(plain);
  impl.normalized_matcher.build(normalized);
  impl.tokens = std::move(spec.tokens);
  impl.added = std::move(spec.added);
  impl.pre = std::move(spec.pre);
  impl.prefix_ids = std::move(spec.prefix_ids);
  impl.suffix_ids = std::move(spec.suffix_ids);
  impl.bos = spec.bos;
  impl.eos = spec.eos;
  impl.pad = spec.pad;
  if (impl.bos >= 0) impl.bos_token = impl.tokens[impl.bos];
  if (impl.eos >= 0) impl.eos_token = impl.tokens[impl.eos];
  impl.chat_template = std::move(spec.chat_template);
  *out = std::move(impl);
  return Status::Ok();
}

namespace {

// Per-thread scratch for encode: no allocation per call once warm.
struct EncodeScratch {
  std::vector<Segment> plain, normalized;
  Pieces pieces;
};

}  // namespace

Status Tokenizer::encode(std::string_view text, bool add_special_tokens, std::vector<int32_t>* ids) const {
  ids->clear();
  size_t bad = 0;
  if (!utf8_is_valid(text, &bad)) {
    return invalid_argument("text is not valid UTF-8 (ill-formed byte 0x" +
                            [&] {
                              static const char hex[] = "0123456789abcdef";
                              const uint8_t b = static_cast<uint8_t>(text[bad]);
                              return std::string{hex[b >> 4], hex[b & 15]};
                            }() +
                            " at byte offset " + std::to_string(bad) + ")");
  }
  if (text.size() > UINT32_MAX) return invalid_argument("text longer than 4 GiB");
  const Impl& m = *impl_;
  thread_local EncodeScratch scratch;
  EncodeScratch& s = scratch;
  if (add_special_tokens) ids->insert(ids->end(), m.prefix_ids.begin(), m.prefix_ids.end());

  auto encode_plain = [&](std::string_view part) -> Status {
    FS_RETURN_IF_ERROR(m.pre.split(part, &s.pieces));
    for (size_t i = 0; i < s.pieces.size(); ++i) m.bpe.encode_piece(s.pieces.piece(i), ids);
    return Status::Ok();
  };
  s.plain.clear();
  if (m.plain_matcher.empty()) s.plain.push_back({0, static_cast<uint32_t>(text.size()), -1});
  else m.plain_matcher.split(text, &s.plain);
  for (const Segment& seg : s.plain) {
    if (seg.id >= 0) {
      ids->push_back(seg.id);
      continue;
    }
    const std::string_view part = text.substr(seg.begin, seg.end - seg.begin);
    if (m.normalized_matcher.empty()) {
      FS_RETURN_IF_ERROR(encode_plain(part));
      continue;
    }
    s.normalized.clear();
    m.normalized_matcher.split(part, &s.normalized);
    for (const Segment& inner : s.normalized) {
      if (inner.id >= 0) ids->push_back(inner.id);
      else FS_RETURN_IF_ERROR(encode_plain(part.substr(inner.begin, inner.end - inner.begin)));
    }
  }
  if (add_special_tokens) ids->insert(ids->end(), m.suffix_ids.begin(), m.suffix_ids.end());
  return Status::Ok();
}

Status Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens, std::string* text) const {
  text->clear();
  const Impl& m = *impl_;
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (!valid_id(id)) {
      return out_of_range("decode: id " + std::to_string(id) + " (position " + std::to_string(i) +
                          ") is not in the vocabulary of " + std::to_string(vocab_size()));
    }
    if (skip_special_tokens && (m.flags[id] & Impl::kSpecial)) continue;
    bytes += m.pieces[id];
  }
  Utf8LossyDecoder dec;
  text->reserve(bytes.size());
  dec.feed(bytes, text);
  dec.finish(text);
  return Status::Ok();
}

Status Tokenizer::token_to_piece(int32_t id, std::string* bytes) const {
  if (!valid_id(id)) return out_of_range("token id " + std::to_string(id) + " is not in the vocabulary");
  *bytes = impl_->pieces[id];
  return Status::Ok();
}

Status Tokenizer::id_to_token(int32_t id, std::string* token) const {
  if (!valid_id(id)) return out_of_range("token id " + std::to_string(id) + " is not in the vocabulary");
  *token = impl_->tokens[id];
  return Status::Ok();
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
  const auto it = impl_->token_ids.find(std::string(token));
  return it == impl_->token_ids.end() ? -1 : it->second;
}

bool Tokenizer::valid_id(int32_t id) const {
  return id >= 0 && id < vocab_size() && (impl_->flags[id] & Impl::kValid);
}
std::string_view Tokenizer::piece_unchecked(int32_t id) const { return impl_->pieces[id]; }
int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->flags.size()); }
int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }
int32_t Tokenizer::pad_id() const { return impl_->pad; }
bool Tokenizer::is_special(int32_t id) const { return valid_id(id) && (impl_->flags[id] & Impl::kSpecial); }
const std::string& Tokenizer::bos_token() const { return impl_->bos_token; }
const std::string& Tokenizer::eos_token() const { return impl_->eos_token; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

}  // namespace flashserve::text
