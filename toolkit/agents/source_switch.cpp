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
      // vLLM's C++/CUDA sources (csrc/): the copyright line of its kernels, its namespace and qualified names, its
      // dtype-dispatch macros, and the op-registration header and macro of its extension.
      {"vLLM", "The vLLM team", false},
      {"vLLM", "namespace vllm", true},
      {"vLLM", "vllm::", false},
      {"vLLM", "VLLM_DISPATCH_", false},
      {"vLLM", "#include \"core/registration.h\"", true},
      {"vLLM", "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME", false},
      // SGLang: its copyright line (also on sgl-kernel's C++/CUDA files) and package imports.
      {"SGLang", "SGLang Team", false},
      {"SGLang", "from sglang.", true},
      {"SGLang", "from sglang import", true},
      {"SGLang", "import sglang", true},
      // sgl-kernel: its own headers included by name, its torch op library, its Python package.
      {"SGLang", "#include \"sgl_kernel", true},
      {"SGLang", "TORCH_LIBRARY_FRAGMENT(sgl_kernel", false},
      {"SGLang", "TORCH_LIBRARY_EXPAND(sgl_kernel", false},
      {"SGLang", "from sgl_kernel", true},
      {"SGLang", "import sgl_kernel", true},
      // llama.cpp: its own headers (ggml*.h, llama*.h, gguf*.h) included by name.
      {"llama.cpp", "#include \"ggml", true},
      {"llama.cpp", "#include \"llama", true},
      {"llama.cpp", "#include \"gguf", true},
      {"llama.cpp", "#include <ggml", true},
      {"llama.cpp", "#include <llama", true},
      {"llama.cpp", "#include <gguf", true},
      // ggml's and llama.cpp's sources themselves (a header or a .c/.cu file of the library includes its siblings
      // under other names): the licence line, the export and assertion macros, the core structs, the backend and
      // CUDA-backend function prefixes.
      {"llama.cpp", "The ggml authors", false},
      {"llama.cpp", "GGML_API ", false},
      {"llama.cpp", "LLAMA_API ", false},
      {"llama.cpp", "GGML_ASSERT(", false},
      {"llama.cpp", "struct ggml_tensor", false},
      {"llama.cpp", "struct ggml_context", false},
      {"llama.cpp", "ggml_backend_", false},
      {"llama.cpp", "ggml_cuda_", false},
      // llama.cpp's Python side: its gguf package (gguf-py, the converters) and the llama-cpp-python bindings.
      {"llama.cpp", "from gguf import", true},
      {"llama.cpp", "from gguf.", true},
      {"llama.cpp", "import gguf", true},
      {"llama.cpp", "from llama_cpp", true},
      {"llama.cpp", "import llama_cpp", true},
      // transformers: the licence header of its modelling files and its package imports, including the relative
      // imports its model files use (modules only transformers has at that depth).
      {"transformers", "The HuggingFace Inc. team", false},
      {"transformers", "The HuggingFace Team", false},
      {"transformers", "from transformers", true},
      {"transformers", "import transformers", true},
      {"transformers", "from ...modeling_utils import", true},
      {"transformers", "from ...modeling_outputs import", true},
      {"transformers", "from ...modeling_rope_utils import", true},
      {"transformers", "from ...modeling_attn_mask_utils import", true},
      {"transformers", "from ...modeling_flash_attention_utils import", true},
      {"transformers", "from ...configuration_utils import", true},
      {"transformers", "from ...cache_utils import", true},
      {"transformers", "from ...activations import", true},
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

std::optional<ForeignSignature> find_quoted_foreign_signature(std::string_view text) {
  for (const ForeignSignature& s : foreign_signatures())
    if (text.find(s.marker) != std::string_view::npos) return s;
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
