// The paper's source switch, as code. SWITCH=OFF (the default, and the only mode in which a target counts as
// absorbed): no tool may read a configured reference source tree, nor any file whose text carries a recognisable
// signature of a foreign inference framework, wherever it lies. SWITCH=ON: only the explorer may read the reference
// trees, and every such read is logged.
//
// The signatures are deliberately specific, so that our own sources never trip them: licence/copyright lines the
// projects put at the top of their files, import/include lines that only their own modules (or code built on them)
// contain, and for their C++/CUDA sources (vLLM's csrc/, sgl-kernel, ggml and llama.cpp) namespaces, macro and
// function prefixes and op-registration lines that only they use (`namespace vllm`, VLLM_DISPATCH_, `GGML_API `,
// `ggml_backend_`, TORCH_LIBRARY_FRAGMENT(sgl_kernel, ...). Written from what identifies each project, not copied
// from it. A marker with line_start must open a line (after indentation); the others may appear
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
// The first marker found anywhere in `text`, line-start markers too: for text that quotes files in another form (a
// gate's evidence: output JSON-escaped into a report, compiler diagnostics prefixing each quoted line with `N |`).
std::optional<ForeignSignature> find_quoted_foreign_signature(std::string_view text);

enum class SourceSwitch { off, on };
SourceSwitch parse_source_switch(const std::string& text);  // "off"|"on" (any case); throws mi::Error otherwise
const char* to_string(SourceSwitch s);

}  // namespace mi::agents
