// tokenizer.json "added_tokens": tokens matched verbatim in the input before anything else runs (special tokens
// such as <|im_start|>, and added non-special ones such as <think>). Semantics (Hugging Face tokenizers):
// - tokens with "normalized": false are found in the raw text; tokens with "normalized": true are found in the
//   normalized text (their content normalized the same way);
// - at each position the longest token wins, scanning left to right, matches never overlap;
// - "single_word": only a match not touching a word character (letter, number, '_') on either side counts;
// - "lstrip" / "rstrip": whitespace before / after the match is swallowed into it.
// The text between matches goes on through normalization, pre-tokenization and BPE.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/normalizer.h"

namespace mi::tok {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool normalized = false;
  bool lstrip = false, rstrip = false, single_word = false;
};

// A piece of input after added-token splitting: either plain text or one added token.
struct TextPiece {
  std::string_view text;
  int32_t token_id = -1;  // >= 0: this piece is that added token
};

class AddedVocabulary {
 public:
  // `config` is the tokenizer.json "added_tokens" array (absent/null allowed); contents of normalized tokens are
  // matched after `normalizer`.
  static AddedVocabulary from_json(const nlohmann::json& config, const Normalizer& normalizer,
                                   std::string_view source);

  // Splits `text` on the tokens of one matching pass (normalized == false: raw text; true: normalized text).
  std::vector<TextPiece> split(std::string_view text, bool normalized_pass) const;
  bool has_tokens(bool normalized_pass) const { return !pass(normalized_pass).by_first_byte.empty(); }

  const AddedToken* find_id(int32_t id) const;
  std::optional<int32_t> find_content(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  struct Pass {
    std::string_view name;
    // Token indices by the first byte of their match string, longest first.
    std::unordered_map<unsigned char, std::vector<size_t>> by_first_byte;
    std::vector<std::string> match_strings;  // per token index: content (or normalized content)
  };
  const Pass& pass(bool normalized_pass) const { return normalized_pass ? normalized_ : raw_; }

  std::vector<AddedToken> tokens_;
  std::unordered_map<int32_t, size_t> by_id_;
  Pass raw_, normalized_;
};

}  // namespace mi::tok
