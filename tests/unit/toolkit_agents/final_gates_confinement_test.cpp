// The final gates build agent-written code in the isolation of agents' commands (engine_gate.h), not on the host:
// planted cheats that pull a file the agents may not read into the engine at compile time fail the build, and the
// file's text never reaches the build tree. Where no isolation can hide paths, the final gates refuse to build at
// all, which fails them too. (The honest path, a confined build that then passes acceptance on the host, is
// AgentGenerate.StagesWrittenByTheImplementersAreRepairedAndAcceptedByTheRealGates; a confined build that reaches a
// failing acceptance is AgentGenerate.AgentWrittenEngineEmittingWrongTokensFailsAcceptance.)
// Slow: each test generates an engine and builds it once, up to the planted file.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "agents/engine_gate.h"
#include "agents/isolated_command.h"
#include "agents/signature_files.h"
#include "agents_test_support.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::slurp;
using agents_test::write;

constexpr const char* kMarker = "MI-HIDDEN-REFERENCE-MARKER-7f3a91";

// A header that puts kMarker into whatever includes it (kept in the object even though nothing reads it), after
// `first_line`.
std::string marker_header(const std::string& first_line) {
  return first_line + "\n#pragma once\n[[gnu::used]] static const char mi_reference_marker[] = \"" + kMarker + "\";\n";
}

// An engine laid down by the generator (not built), whose main source includes `header` (as written in the
// #include) and uses what it declares: without the header's text the source does not compile.
fs::path engine_including(const mi_test::TempDir& dir, const std::string& header) {
  const fs::path engine = dir / "engine";
  const auto gen = mi_test::metainfer({"generate", "--model", mi_test::golden("qwen3-tiny").string(), "--platform", "x86-64-avx2",
                                       "-o", engine.string(), "--no-verify"});
  EXPECT_EQ(gen.exit_code, 0) << gen.out << gen.err;
  const fs::path main_cpp = engine / "src/engine/engine_main.cpp";
  write(main_cpp, "#include \"" + header + "\"\nstatic_assert(sizeof(mi_reference_marker) > 1);\n" + slurp(main_cpp));
  return engine;
}

// True when some file under `dir` holds kMarker.
bool marker_under(const fs::path& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
    if (it->is_regular_file() && slurp(it->path()).find(kMarker) != std::string::npos) return true;
  return false;
}

// What every planted include must come to: B0 fails (in the isolation: the compiler cannot open the file; without one
// that hides paths: the build is refused), and nothing of the file is in the build tree or the evidence.
void expect_confined_build_failed(const FinalGatesOutcome& f, const fs::path& engine, const std::string& file_name) {
  EXPECT_FALSE(f.passed);
  EXPECT_EQ(f.state, "FAILED:B0_build") << f.evidence;
  EXPECT_TRUE(f.acceptance.empty());
  EXPECT_NE(f.evidence.find("the confined build"), std::string::npos) << f.evidence;
  if (command_isolation().hides_paths) {
    EXPECT_NE(f.evidence.find("FAILED B0_build: build failed"), std::string::npos) << f.evidence;
    // The compiler cannot open the file (bubblewrap's /dev/null on a nodev mount, a mode-000 tmpfs), or it reads an
    // empty file and misses what the file declares (the fallback's /dev/null).
    const bool named = f.evidence.find(file_name) != std::string::npos || f.evidence.find("mi_reference_marker") != std::string::npos;
    EXPECT_TRUE(named) << "the compiler's error names the file or what it declares\n" << f.evidence;
  } else {
    EXPECT_NE(f.evidence.find("refused"), std::string::npos) << f.evidence;
  }
  EXPECT_EQ(f.evidence.find(kMarker), std::string::npos) << f.evidence;
  EXPECT_FALSE(marker_under(engine / "build"));
  EXPECT_FALSE(fs::exists(engine / "reports/verification.json")) << "no gate ran on the host";
}

// A reference tree given as hidden (--reference) that lies where the build could reach it, inside the engine
// directory it compiles, #included by its absolute path.
TEST(AgentFinalGates, SourceIncludingAHiddenReferenceByAbsolutePathFailsTheConfinedBuild) {
  mi_test::TempDir dir("final-gates-hidden");
  const fs::path reference = dir / "engine/third_party/reference";
  const fs::path engine = engine_including(dir, (reference / "llama_secret.h").string());
  write(reference / "llama_secret.h", marker_header("// a reference implementation the agents must re-derive"));
  ASSERT_FALSE(find_foreign_signature_in_file(reference / "llama_secret.h")) << "hidden as a reference tree, not by its signature";
  const FinalGatesOutcome f =
      engine_final_gates({METAINFER_BINARY, METAINFER_SOURCE_DIR, 1800, 16 * 1024, {reference}}, engine, 2);
  expect_confined_build_failed(f, engine, "llama_secret.h");
  EXPECT_TRUE(fs::exists(reference / "llama_secret.h")) << "covered in the isolation, untouched on the host";
}

// A file of the engine directory carrying a foreign framework's signature (signature_files.h), #included by a
// relative path: hidden from the build without being named.
TEST(AgentFinalGates, SourceIncludingAFileWithAForeignSignatureFailsTheConfinedBuild) {
  mi_test::TempDir dir("final-gates-signature");
  const fs::path engine = engine_including(dir, "ported_attention.h");
  write(engine / "src/engine/ported_attention.h", marker_header("// Copyright 2024 The HuggingFace Inc. team."));
  ASSERT_TRUE(find_foreign_signature_in_file(engine / "src/engine/ported_attention.h"));
  const FinalGatesOutcome f = engine_final_gates({METAINFER_BINARY, METAINFER_SOURCE_DIR, 1800}, engine, 2);
  expect_confined_build_failed(f, engine, "ported_attention.h");
}

// The gates mount a checkpoint's data files for agent-written code, by an allow-list, not its directory: the
// checkpoint's own model code (trust_remote_code's modeling_*.py), a golden case's answers (trace.json,
// logits.safetensors) and any allowed JSON carrying a foreign signature stay out of the sandbox.
TEST(AgentFinalGates, OnlyTheCheckpointsDataFilesAreMountedForAgentCode) {
  mi_test::TempDir dir("checkpoint-files");
  const fs::path model = dir / "model";
  for (const char* f : {"config.json", "model.safetensors", "model-00001-of-00002.safetensors", "tokenizer.json", "trace.json",
                        "logits.safetensors", "answers.json"})
    mi_test::write_text(model / f, "{}\n");
  mi_test::write_text(model / "model.safetensors.index.json",
                      R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", "b": "shard-b.safetensors", "c": "../x.safetensors"}})");
  mi_test::write_text(model / "shard-b.safetensors", "x");
  mi_test::write_text(model / "modeling_secret.py", "# Copyright 2024 The HuggingFace Inc. team.\nfrom transformers import PreTrainedModel\n");
  mi_test::write_text(model / "generation_config.json", "{\"code\": [\n\"x\"]}\n# SPDX-FileCopyrightText: Copyright contributors to the vLLM project\n");
  mi_test::write_text(model / "sub/extra.safetensors", "x");
  // A signature past the first megabytes of a large JSON (real tokenizer.json files are 7-17 MB) is found too.
  mi_test::write_text(model / "tokenizer_config.json", "{\"pad\": \"" + std::string(std::size_t(5) << 20, 'a') +
                                                          "\"}\n# Copyright 2024 The HuggingFace Inc. team.\n");
  std::vector<std::string> names;
  for (const fs::path& f : mi::agents::checkpoint_data_files(model)) names.push_back(f.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model-00001-of-00002.safetensors", "model.safetensors",
                                             "model.safetensors.index.json", "shard-b.safetensors", "tokenizer.json"}));
  EXPECT_TRUE(mi::agents::checkpoint_data_files(dir / "missing").empty());
  // A golden case: its weights and config, never its answers.
  names.clear();
  for (const fs::path& f : mi::agents::checkpoint_data_files(mi_test::golden("qwen3-tiny"))) names.push_back(f.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"config.json", "model.safetensors"}));
}

}  // namespace
