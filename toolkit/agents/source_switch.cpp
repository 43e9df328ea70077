#include "agents/source_switch.h"

#include <algorithm>
#include <cctype>

#include "common/error.h"

namespace mi::agents {

const std::vector<ForeignSignature>& foreign_signatures() {
  static const std::vector<ForeignSignature> list = {
      // vLLM: the SPDX header on its Python files, and its package imports.
      {"vLLM", "SPDX-FileCopyrightText: Copyright contributors to the vLLM project", false},
      {"vLLM", "from vllm.", true},
      {"vLLM", "from vllm import", true},
      {"vLLM", "import vllm", true},
      // SGLang: its copyright line and package imports.
      {"SGLang", "SGLang Team", false},
      {"SGLang", "from sglang.", true},
      {"SGLang", "from sglang import", true},
      {"SGLang", "import sglang", true},
      // llama.cpp: its own headers (ggml*.h, llama*.h) included by name.
      {"llama.cpp", "#include \"ggml", true},
      {"llama.cpp", "#include \"llama", true},
      {"llama.cpp", "#include <ggml", true},
      // transformers: the licence header of its modelling files and its package imports, including the relative
      // imports its model files use.
      {"transformers", "The HuggingFace Inc. team", false},
      {"transformers", "The HuggingFace Team", false},
      {"transformers", "from transformers", true},
      {"transformers", "import transformers", true},
      {"transformers", "from ...modeling_utils import", true},
  };
  return list;
}

std::optional<ForeignSignature> find_foreign_signature(std::string_view text) {
  for (const ForeignSignature& s : foreign_signatures()) {
    std::size_t pos = 0;
    while ((pos = text.find(s.marker, pos)) != std::string_view::npos) {
      if (!s.line_start) return s;
      std::size_t i = pos;
      while (i > 0 && (text[i - 1] == ' ' || text[i - 1] == '\t')) --i;
      if (i == 0 || text[i - 1] == '\n') return s;
      ++pos;
    }
  }
  return std::nullopt;
}

SourceSwitch parse_source_switch(const std::string& text) {
  std::string t = text;
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (t == "off") return SourceSwitch::off;
  if (t == "on") return SourceSwitch::on;
  fail("source switch: expected on or off, got '", text, "'");
}

const char* to_string(SourceSwitch s) { return s == SourceSwitch::on ? "on" : "off"; }

}  // namespace mi::agents
