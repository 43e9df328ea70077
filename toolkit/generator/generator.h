// `metainfer generate`: constraints + CKB -> a standalone engine directory.
//   DIR/MANIFEST.json         every file: source component, contract, sha256, lines; constraints; CKB version
//   DIR/README.md             the engine's command line (components/engine/README.md)
//   DIR/CMakeLists.txt        its own build: explicit source lists, the platform's ISA flags, the manifest hash
//   DIR/plan.json             the coverage plan it was generated from
//   DIR/src/engine_config.h   generated: dimensions, layer pattern, kernel level, runtime defaults (constexpr)
//   DIR/src/model.h           generated: class engine::Model, the forward path written out for this model
//   DIR/src/<component>/...   copied components: only those the plan requires, plus what they #include
//   DIR/tests/stage_*.cpp     the test contracts of each generation stage (tests/engine_contracts/)
// Sources are a pure function of (plan, CKB, component tree): regenerating gives byte-identical files.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ckb/ckb.h"
#include "coverage/coverage.h"
#include "generator/manifest.h"

namespace mi::generator {

struct GenerateOptions {
  std::filesystem::path out;       // engine directory
  bool force = false;              // write into a non-empty directory that is not a metainfer engine
  // Test-only fault injection, to show gates failing (README "Gates"): "" | "attention_scale" (a numerical bug in
  // the copied attention component) | "fixed_output" (an engine that ignores its weights and prints the greedy ids
  // of fault_trace, a golden trace.json).
  std::string fault;
  std::filesystem::path fault_trace;
  // `generate --tune`: the measured timings behind the constraints' [tuning] choices, kept in MANIFEST.json
  // ("tuning"); null when the engine was not tuned.
  nlohmann::json tuning_report;
};

struct GeneratedFile {
  ManifestEntry entry;
  std::string content;
};

struct Engine {
  std::filesystem::path dir;
  std::string name;
  std::filesystem::path binary;   // DIR/build/<name>
  std::vector<std::string> stage_tests;  // stage -> executable name, in stage order
  nlohmann::json manifest;
};

// The engine's name: <checkpoint directory name>-<kernel level>, restricted to [A-Za-z0-9._-].
std::string engine_name(const coverage::Plan& plan);

// The files of the engine (not yet written).
std::vector<GeneratedFile> emit_engine(const ckb::Ckb& ckb, const coverage::Plan& plan, const GenerateOptions& options);

// Writes the files and MANIFEST.json into options.out. Refuses a non-empty directory that is not an engine unless
// force; in an existing engine directory it replaces the sources (build/ is kept for incremental builds).
Engine write_engine(const ckb::Ckb& ckb, const coverage::Plan& plan, const GenerateOptions& options);

// Reads DIR/MANIFEST.json back into an Engine description.
Engine load_engine(const std::filesystem::path& dir);

// Whole component library size (lines in components/), for the manifest's "engine vs library" numbers.
int component_library_lines(const std::filesystem::path& repo_root);

// The stages whose test contracts every engine carries, in order (ckb.toml stages that have a test file).
const std::vector<std::string>& engine_test_stages();

}  // namespace mi::generator
