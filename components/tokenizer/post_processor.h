// tokenizer.json "post_processor": what encode(text, add_special = true) adds around the model's ids.
// Supported: null, ByteLevel (adds nothing; it only adjusts offsets), TemplateProcessing ("single" template:
// SpecialToken / Sequence items, e.g. Llama 3's <|begin_of_text|> $A), BertProcessing / RobertaProcessing
// ([cls] A [sep]), Sequence of these. Pair templates are not used by this project.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::tok {

class PostProcessor {
 public:
  static PostProcessor from_json(const nlohmann::json& config, std::string_view source);

  // Returns `ids` with the special tokens of the single-sequence template around them.
  std::vector<int32_t> apply(const std::vector<int32_t>& ids) const;

 private:
  // The single-sequence template flattened: ids to emit, with kSequenceMarker where the text's ids go.
  static constexpr int64_t kSequenceMarker = -1;
  std::vector<int64_t> template_;  // empty: identity
};

}  // namespace mi::tok
