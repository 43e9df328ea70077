#include "tokenizer/tokenizer.h"

#include "common/error.h"
#include "common/json_file.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/cleanup_spaces.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

struct Tokenizer::Impl {
  std::string source;
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  BpeModel model;
  AddedVocabulary added;
  PostProcessor post_processor;
  Decoder decoder;
  std::optional<int32_t> bos_id, eos_id;
  bool clean_up_spaces = false;
  size_t vocab_size = 0;

  void encode_plain(std::string_view text, std::vector<int32_t>* ids) const {
    std::vector<std::string> words;
    for (const TextPiece& piece : added.split(text, /*normalized_pass=*/false)) {
      if (piece.token_id >= 0) {
        ids->push_back(piece.token_id);
        continue;
      }
      const std::string normalized = normalizer.apply(piece.text);
      for (const TextPiece& sub : added.split(normalized, /*normalized_pass=*/true)) {
        if (sub.token_id >= 0) {
          ids->push_back(sub.token_id);
          continue;
        }
        words.clear();
        pre_tokenizer.apply(sub.text, &words);
        for (const std::string& word : words) model.encode(word, ids);
      }
    }
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

// tokenizer_config.json writes special tokens as "<s>" or {"content": "<s>", ...}.
std::optional<std::string> config_token(const nlohmann::json& config, const char* field, std::string_view source) {
  if (!config.is_object() || !config.contains(field) || config[field].is_null()) return std::nullopt;
  const auto& v = config[field];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  fail(source, ": field '", field, "': expected a string, {\"content\": ...} or null");
}

}  // namespace

Tokenizer Tokenizer::from_json(const nlohmann::json& j, const nlohmann::json& config, std::string_view source) {
  auto impl = std::make_unique<Impl>();
  impl->source = std::string(source);
  if (!j.is_object()) fail(source, ": expected a JSON object at the top level");
  auto field = [&](const char* name) { return j.contains(name) ? j[name] : nlohmann::json(); };

  if (!j.contains("model") || !j["model"].is_object()) fail(source, ": missing object field 'model'");
  const auto& model = j["model"];
  // Files written by old versions of `tokenizers` omit model.type for BPE.
  const std::string model_type = model.contains("type") && model["type"].is_string()
                                     ? model["type"].get<std::string>()
                                     : (model.contains("merges") ? "BPE" : "(missing)");
  if (model_type != "BPE") {
    fail(source, ": model type '", model_type, "' is not supported (only BPE is implemented)");
  }
  impl->normalizer = Normalizer::from_json(field("normalizer"), source);
  impl->pre_tokenizer = PreTokenizer::from_json(field("pre_tokenizer"), source);
  impl->model = BpeModel::from_json(model, source);
  impl->added = AddedVocabulary::from_json(field("added_tokens"), impl->normalizer, source);
  impl->post_processor = PostProcessor::from_json(field("post_processor"), source);
  impl->decoder = Decoder::from_json(field("decoder"), source);

  impl->vocab_size = impl->model.id_limit();
  for (const AddedToken& t : impl->added.tokens()) {
    impl->vocab_size = std::max(impl->vocab_size, static_cast<size_t>(t.id) + 1);
  }
  Tokenizer tokenizer(std::move(impl));
  // Every id the post-processor can emit must decode.
  for (const int32_t id : tokenizer.impl_->post_processor.apply({})) {
    if (!tokenizer.is_valid_id(id)) fail(source, ": post_processor adds token id ", id, ", which is not in the vocabulary");
  }
  if (config.is_object() && config.contains("clean_up_tokenization_spaces") &&
      !config["clean_up_tokenization_spaces"].is_null()) {
    if (!config["clean_up_tokenization_spaces"].is_boolean()) {
      fail(source, ": tokenizer_config.json clean_up_tokenization_spaces: expected true or false");
    }
    tokenizer.impl_->clean_up_spaces = config["clean_up_tokenization_spaces"].get<bool>();
  }
  for (const char* name : {"bos_token", "eos_token"}) {
    const auto token = config_token(config, name, source);
    if (!token) continue;
    const auto id = tokenizer.token_to_id(*token);
    if (!id) fail(source, ": tokenizer_config.json ", name, " \"", *token, "\" is not a token of tokenizer.json");
    (std::string_view(name) == "bos_token" ? tokenizer.impl_->bos_id : tokenizer.impl_->eos_id) = id;
  }
  return tokenizer;
}

Tokenizer Tokenizer::load(const std::filesystem::path& dir) {
  const std::filesystem::path json_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(json_path)) fail(json_path.string(), ": file not found (expected a Hugging Face tokenizer.json)");
  const nlohmann::json j = read_json_file(json_path);
  const std::filesystem::path config_path = dir / "tokenizer_config.json";
  nlohmann::json config;  // null when absent
  if (std::filesystem::exists(config_path)) config = read_json_file(config_path);
  return from_json(j, config, json_path.string());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  validate_utf8(text, "tokenizer: input text");  // once; later stages assume valid UTF-8
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 4);
  impl_->encode_plain(text, &ids);
  return add_special ? impl_->post_processor.apply(ids) : ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  bool first = true;
  for (const int32_t id : ids) {
    if (!is_valid_id(id)) {
      fail("detokenize: token id ", id, " is not in the vocabulary (valid ids: 0..", vocab_size() - 1, ")");
    }
    if (skip_special && is_special(id)) continue;
    if (!first) bytes.append(impl_->decoder.separator());
    first = false;
    append_token_bytes(id, &bytes);
  }
  std::string text = utf8_lossy(bytes);
  return impl_->clean_up_spaces ? clean_up_tokenization_spaces(text) : text;
}

bool Tokenizer::cleans_up_tokenization_spaces() const { return impl_->clean_up_spaces; }

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = impl_->added.find_content(token)) return id;
  return impl_->model.token_to_id(token);
}

const std::string& Tokenizer::id_to_token(int32_t id) const {
  if (const AddedToken* t = impl_->added.find_id(id)) return t->content;
  if (const std::string* s = impl_->model.id_to_token(id)) return *s;
  fail("tokenizer: token id ", id, " is not in the vocabulary (valid ids: 0..", vocab_size() - 1, ")");
}

bool Tokenizer::is_valid_id(int32_t id) const {
  return impl_->added.find_id(id) != nullptr || impl_->model.id_to_token(id) != nullptr;
}

bool Tokenizer::is_special(int32_t id) const {
  const AddedToken* t = impl_->added.find_id(id);
  return t != nullptr && t->special;
}

size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos_id; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos_id; }

void Tokenizer::append_token_bytes(int32_t id, std::string* out) const {
  impl_->decoder.append_token_bytes(id_to_token(id), out);
}

std::string_view Tokenizer::token_separator() const { return impl_->decoder.separator(); }

}  // namespace mi::tok
