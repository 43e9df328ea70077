// A Hugging Face tokenizer.json tokenizer (byte-level BPE: Qwen2/Qwen3, Llama 3, GPT-2 style), reproducing the
// `tokenizers` pipeline:
//   encode: added tokens split out of the raw text -> normalizer -> added tokens (normalized ones) ->
//           pre_tokenizer -> BPE model per pre-token -> post_processor (only with add_special)
//   decode: ids -> token strings (optionally without special tokens) -> decoder -> UTF-8 text
// Load errors (missing file, malformed JSON, unsupported component types) throw mi::Error naming the file and the
// field. See the component headers in this directory for each stage's supported options.
#pragma once
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::tok {

class Tokenizer {
 public:
  // Reads `dir`/tokenizer.json (required) and `dir`/tokenizer_config.json (optional: bos/eos token names).
  static Tokenizer load(const std::filesystem::path& dir);
  // From an already parsed tokenizer.json (and optional tokenizer_config.json, null if absent).
  static Tokenizer from_json(const nlohmann::json& tokenizer_json, const nlohmann::json& tokenizer_config,
                             std::string_view source);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // `text` must be valid UTF-8 (mi::Error otherwise). add_special: apply the post-processor (e.g. BOS).
  std::vector<int32_t> encode(std::string_view text, bool add_special = false) const;

  // Throws mi::Error naming the first id that is not in the vocabulary. Applies the tokenizer_config.json
  // "clean_up_tokenization_spaces" cleanup when the config enables it (see cleanup_spaces.h).
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // tokenizer_config.json "clean_up_tokenization_spaces" (false when absent, as in current transformers).
  bool cleans_up_tokenization_spaces() const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token's string (byte-level alphabet for model tokens, plain content for added tokens); mi::Error if the
  // id is unknown.
  const std::string& id_to_token(int32_t id) const;
  bool is_valid_id(int32_t id) const;
  bool is_special(int32_t id) const;
  // One past the largest id (model vocabulary and added tokens): the number of embedding rows a model needs.
  size_t vocab_size() const;

  // From tokenizer_config.json "bos_token" / "eos_token" (string or {"content": ...}); nullopt if unset.
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

  // Bytes of one token as the decoder produces them (may be a partial UTF-8 character), and the separator put
  // between tokens. Used by StreamDecoder; `id` must be valid.
  void append_token_bytes(int32_t id, std::string* out) const;
  std::string_view token_separator() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace mi::tok
