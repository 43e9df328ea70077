// SWITCH=OFF recognises the frameworks' C++/CUDA sources as well as their Python: planted files in the shape of
// vLLM's csrc/, sgl-kernel, ggml/llama.cpp (C, CUDA, gguf-py, the Python bindings) and transformers' model files
// (short stand-ins written for the test, each carrying one kind of marker) are refused to the implementer and named
// by framework, while everything the toolkit itself lays into run directories (components, the CKB, the engine test
// contracts) trips none of the markers.
#include <gtest/gtest.h>

#include <map>

#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/signature_files.h"
#include "agents/source_switch.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::write;

const fs::path kSource = METAINFER_SOURCE_DIR;

// path in the run directory -> (framework, file text)
const std::map<std::string, std::pair<std::string, std::string>>& planted() {
  static const std::map<std::string, std::pair<std::string, std::string>> files = {
      {"src/csrc/attention_kernels.cu",
       {"vLLM", "/*\n * Copyright (c) 2023, The vLLM team.\n */\n#include <cuda_runtime.h>\n__global__ void k() {}\n"}},
      {"src/csrc/layernorm.cu",
       {"vLLM", "#include <torch/all.h>\n\nnamespace vllm {\n__global__ void rms_norm_kernel() {}\n}  // namespace vllm\n"}},
      {"src/csrc/dispatch.cu", {"vLLM", "void launch(torch::Tensor& x) {\n  VLLM_DISPATCH_FLOATING_TYPES(x.scalar_type(), \"k\", [&] {});\n}\n"}},
      {"src/csrc/bindings.cpp", {"vLLM", "#include \"core/registration.h\"\n#include <torch/library.h>\n"}},
      {"src/csrc/ops.cpp", {"vLLM", "TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {\n  ops.def(\"f\");\n}\n"}},
      {"src/csrc/call.cu", {"vLLM", "void g() { vllm::rms_norm_kernel<<<1, 1>>>(); }\n"}},
      {"src/sgl/norm.cu", {"SGLang", "/* Copyright 2025 SGLang Team. All Rights Reserved. */\n__global__ void k() {}\n"}},
      {"src/sgl/common.cu", {"SGLang", "#include \"sgl_kernel_ops.h\"\nvoid f() {}\n"}},
      {"src/sgl/ext.cc", {"SGLang", "TORCH_LIBRARY_FRAGMENT(sgl_kernel, m) {\n  m.def(\"f\");\n}\n"}},
      {"src/sgl/use.py", {"SGLang", "import torch\nfrom sgl_kernel import rmsnorm\n"}},
      {"src/ggml/ggml.c", {"llama.cpp", "// ggml core\nstruct ggml_tensor * ggml_add(struct ggml_context * ctx);\n"}},
      {"src/ggml/api.h", {"llama.cpp", "#pragma once\nGGML_API int ggml_blck_size(int type);\n"}},
      {"src/ggml/llama.h", {"llama.cpp", "#pragma once\nLLAMA_API int llama_n_ctx(void);\n"}},
      {"src/ggml/assert.c", {"llama.cpp", "void f(int n) {\n  GGML_ASSERT(n > 0);\n}\n"}},
      {"src/ggml/cuda.cu", {"llama.cpp", "static void k(int device) {\n  ggml_cuda_set_device(device);\n}\n"}},
      {"src/ggml/backend.c", {"llama.cpp", "void run(void * b) { ggml_backend_graph_compute(b, 0); }\n"}},
      {"src/ggml/LICENSE", {"llama.cpp", "MIT License\n\nCopyright (c) 2023-2024 The ggml authors\n"}},
      {"src/ggml/reader.cpp", {"llama.cpp", "#include \"gguf.h\"\nint main() {}\n"}},
      {"src/ggml/main.cpp", {"llama.cpp", "#include <llama.h>\nint main() {}\n"}},
      {"src/ggml/convert.py", {"llama.cpp", "import numpy as np\nimport gguf\n"}},
      {"src/ggml/bind.py", {"llama.cpp", "from llama_cpp import Llama\n"}},
      {"src/hf/modeling_x.py", {"transformers", "import torch\nfrom ...modeling_outputs import BaseModelOutputWithPast\n"}},
      {"src/hf/rope.py", {"transformers", "from ...modeling_rope_utils import dynamic_rope_update\n"}},
      {"src/hf/cfg.py", {"transformers", "from ...configuration_utils import PretrainedConfig\n"}},
      {"src/hf/cache.py", {"transformers", "    from ...cache_utils import DynamicCache\n"}},
      {"src/hf/act.py", {"transformers", "from ...activations import ACT2FN\n"}},
  };
  return files;
}

TEST(AgentForeignSignatures, TheFrameworksCxxAndCudaSourcesAreRecognised) {
  mi_test::TempDir dir("agents-signatures");
  const fs::path run = dir / "run";
  for (const auto& [path, f] : planted()) write(run / path, f.second);
  // Ours: mentioning the frameworks, or names that only look alike, is not their source.
  write(run / "src/ours.cpp", "// Compared with vllm and llama.cpp (ggml); the ggml_tensor layout differs.\nnamespace mi { int gguf_reader; }\n");
  write(run / "src/ours.py", "from .utils import f\nx = 'import vllm'\n");
  SandboxConfig c;
  c.run_dir = run;
  ToolSandbox sb(c);
  const AgentRoleSpec impl = find_role(kSource / "ckb/roles", "implementer");
  for (const auto& [path, f] : planted()) {
    const auto sig = find_foreign_signature(f.second);
    ASSERT_TRUE(sig) << path;
    EXPECT_EQ(sig->framework, f.first) << path << ": " << sig->marker;
    const ToolOutcome r = sb.call(impl, "read_file", {{"path", path}});
    EXPECT_TRUE(r.violation) << path << ": " << r.output;
    EXPECT_NE(r.output.find(f.first + " source signature"), std::string::npos) << r.output;
  }
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "src/ours.cpp"}}).ok);
  EXPECT_TRUE(sb.call(impl, "read_file", {{"path", "src/ours.py"}}).ok);
  EXPECT_EQ(sb.violations().size(), planted().size());
  // Writing them is refused too, and commands never see them (signature_files.h): the scan finds every one (under
  // src/: the violation log quotes the markers it refused, and is a hidden record anyway).
  EXPECT_TRUE(sb.call(impl, "write_file", {{"path", "src/new.cu"}, {"content", "namespace vllm {}\n"}}).violation);
  EXPECT_EQ(signature_file_paths(run / "src").size(), planted().size());
}

// Everything the toolkit lays into run directories is its own: no marker may trip on it.
TEST(AgentForeignSignatures, NothingTheToolkitShipsIntoRunDirectoriesTripsThem) {
  for (const char* tree : {"components", "ckb", "tests/engine_contracts", "examples"}) {
    if (!fs::is_directory(kSource / tree)) continue;
    std::vector<std::string> tripped;
    for (const auto& p : signature_file_paths(kSource / tree)) tripped.push_back(p.string());
    EXPECT_TRUE(tripped.empty()) << tree << ": " << ::testing::PrintToString(tripped);
  }
}

}  // namespace
