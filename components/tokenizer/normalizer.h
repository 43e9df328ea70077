// tokenizer.json "normalizer": the text transformation applied before pre-tokenization (Hugging Face tokenizers
// pipeline: normalizer -> pre_tokenizer -> model -> post_processor; decoder on the way back).
// Supported: null, NFC, NFD, NFKC, NFKD (utf8proc), Lowercase, Sequence of these. Anything else is rejected at load.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::tok {

class Normalizer {
 public:
  enum class Step { kNFC, kNFD, kNFKC, kNFKD, kLowercase };

  // `config` is the tokenizer.json "normalizer" value (null allowed); `source` names the file for errors.
  static Normalizer from_json(const nlohmann::json& config, std::string_view source);

  bool is_identity() const { return steps_.empty(); }
  // Applies the steps in order. `text` must be valid UTF-8.
  std::string apply(std::string_view text) const;

 private:
  std::vector<Step> steps_;
};

}  // namespace mi::tok
