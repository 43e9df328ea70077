// The paper's source switch, as code. SWITCH=OFF (the default, and the only mode in which a target counts as
// absorbed): no tool may read a configured reference source tree, nor any file whose text carries a recognisable
// signature of a foreign inference framework, wherever it lies. SWITCH=ON: only the explorer may read the reference
// trees, and every such read is logged.
//
// The signatures are deliberately few and specific, so that our own sources never trip them: licence/copyright
// lines the projects put at the top of their files, and import/include lines that only their own modules (or code
// built on them) contain. A marker with line_start must open a line (after indentation); the others may appear
// anywhere. This is not a plagiarism detector: it stops the obvious route of reading the frameworks' files, and the
// configured reference paths stop the rest of a known checkout.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mi::agents {

struct ForeignSignature {
  std::string framework;  // "vLLM", "SGLang", "llama.cpp", "transformers"
  std::string marker;
  bool line_start = false;
};

const std::vector<ForeignSignature>& foreign_signatures();

// The first signature found in `text`, if any.
std::optional<ForeignSignature> find_foreign_signature(std::string_view text);

enum class SourceSwitch { off, on };
SourceSwitch parse_source_switch(const std::string& text);  // "off"|"on" (any case); throws mi::Error otherwise
const char* to_string(SourceSwitch s);

}  // namespace mi::agents
