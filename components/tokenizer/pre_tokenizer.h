// tokenizer.json "pre_tokenizer": splits normalized text into pieces ("pre-tokens") that BPE encodes
// independently, and may rewrite them (ByteLevel maps every byte to its alphabet character).
// Supported: null, Split (Regex or String pattern; behaviors Removed, Isolated, MergedWithPrevious,
// MergedWithNext, Contiguous; invert), ByteLevel (add_prefix_space, use_regex = GPT-2 pattern), Sequence.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/regex.h"

namespace mi::tok {

class PreTokenizer {
 public:
  // `config` is the tokenizer.json "pre_tokenizer" value (null allowed); `source` names the file for errors.
  static PreTokenizer from_json(const nlohmann::json& config, std::string_view source);

  // Splits one piece of normalized text (valid UTF-8) and appends the resulting pre-tokens to `out`.
  void apply(std::string_view text, std::vector<std::string>* out) const;

  // True if a ByteLevel step maps bytes to the byte-level alphabet (then the model sees mapped text).
  bool is_byte_level() const;

  enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

  struct Step {
    enum Kind { kSplit, kByteLevel } kind = kSplit;
    // kSplit: either a regex or a literal string pattern.
    std::shared_ptr<const Regex> regex;
    std::string literal;
    SplitBehavior behavior = SplitBehavior::kIsolated;
    bool invert = false;
    // kByteLevel
    bool add_prefix_space = false;
    bool use_regex = false;
  };

 private:
  std::vector<Step> steps_;
};

}  // namespace mi::tok
