#include "server/text/text_model.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "server/text/utf8.h"

namespace flashserve::text {

// A GGUF file's tokenizer keys (tokenizer_gguf_file.cc, over the model's GGUF reader).
Status read_gguf_tokenizer_metadata(const std::string& path, GgufTokenizerMetadata* meta);

namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

Status load_tokenizer(const std::string& path, Tokenizer* tok, std::string* description, std::string* source) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (ends_with(path, ".gguf")) {
    GgufTokenizerMetadata meta;
    FS_RETURN_IF_ERROR(read_gguf_tokenizer_metadata(path, &meta));
    FS_RETURN_IF_ERROR(Tokenizer::load_from_gguf_metadata(meta, tok));
    *description = "byte-level BPE (gguf " + path + ", pre-tokenizer " + (meta.pre.empty() ? "default" : meta.pre) + ")";
    *source = "gguf";
    return Status::Ok();
  }
  const fs::path json = fs::is_directory(path, ec) ? fs::path(path) / "tokenizer.json" : fs::path(path);
  FS_RETURN_IF_ERROR(Tokenizer::from_hf_file(json.string(), tok));
  *description = "byte-level BPE (" + json.string() + ")";
  *source = (json.parent_path() / "tokenizer_config.json").string();
  return Status::Ok();
}

}  // namespace

bool known_chat_role(const std::string& role) {
  return role == "system" || role == "user" || role == "assistant" || role == "tool";
}

Status TextModel::from_tokenizer(Tokenizer tokenizer, std::string description, std::string chat_source,
                                 TextModel* out) {
  TextModel tm;
  tm.tokenizer_ = std::make_unique<Tokenizer>(std::move(tokenizer));
  tm.description_ = std::move(description) + ", " + std::to_string(tm.tokenizer_->vocab_size()) + " tokens";
  if (!tm.tokenizer_->chat_template().empty()) {
    auto chat = std::make_unique<ChatTemplate>();
    const Status st = ChatTemplate::parse(tm.tokenizer_->chat_template(), chat.get());
    if (!st.ok()) return Status(st.code(), "chat template (" + chat_source + "): " + st.message());
    tm.chat_ = std::move(chat);
    tm.chat_source_ = std::move(chat_source);
  }
  *out = std::move(tm);
  return Status::Ok();
}

Status TextModel::load(const std::string& model_path, const std::string& tokenizer_path, TextModel* out) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string path = tokenizer_path;
  if (path.empty()) {
    if (model_path.rfind("synthetic:", 0) == 0) {  // no tokenizer: token ids only
      *out = TextModel();
      return Status::Ok();
    }
    if (fs::is_directory(model_path, ec) && !fs::exists(fs::path(model_path) / "tokenizer.json", ec)) {
      *out = TextModel();  // a folder with weights only
      return Status::Ok();
    }
    path = model_path;
  }
  Tokenizer tok;
  std::string description, source;
  FS_RETURN_IF_ERROR(load_tokenizer(path, &tok, &description, &source));
  return from_tokenizer(std::move(tok), description, source, out);
}

Status TextModel::encode_text(const std::string& text, bool add_special_tokens, std::vector<int32_t>* ids) const {
  if (!has_tokenizer()) return unsupported("this model has no tokenizer");
  if (text.empty()) return invalid_argument("the prompt text is empty");
  return tokenizer_->encode(text, add_special_tokens, ids);
}

Status TextModel::encode_chat(const std::vector<ChatMessage>& messages, bool add_generation_prompt, std::string* prompt,
                              std::vector<int32_t>* ids) const {
  if (!has_tokenizer()) return unsupported("this model has no tokenizer");
  if (!has_chat_template()) return unsupported("this model has no chat template");
  if (messages.empty()) return invalid_argument("messages: the list is empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!known_chat_role(m.role))
      return invalid_argument("messages[" + std::to_string(i) + "]: unknown role '" + m.role +
                              "' (system, user, assistant, tool)");
    size_t at = 0;
    if (!utf8_is_valid(m.content, &at))
      return invalid_argument("messages[" + std::to_string(i) + "]: content is not valid UTF-8 (byte " +
                              std::to_string(at) + ")");
  }
  RenderOptions opt;
  opt.add_generation_prompt = add_generation_prompt;
  opt.bos_token = tokenizer_->bos_token();
  opt.eos_token = tokenizer_->eos_token();
  std::string text;
  FS_RETURN_IF_ERROR(chat_->render(messages, opt, &text));  // INVALID_ARGUMENT or RESOURCE_EXHAUSTED, named
  if (text.empty()) return invalid_argument("chat template: the rendered prompt is empty");
  FS_RETURN_IF_ERROR(tokenizer_->encode(text, false, ids));
  *prompt = std::move(text);
  return Status::Ok();
}

}  // namespace flashserve::text
