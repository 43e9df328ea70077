// Small helpers the agent tests share: files in a run directory, the scripted endpoint's tool-call objects, and an
// agent run in a run directory against the scripted endpoint.
#pragma once
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <vector>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "agents/agent_run.h"
#include "scripted_llm_server.h"

namespace agents_test {

inline void write(const std::filesystem::path& p, const std::string& text) {
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

inline std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// One planned tool call of a scripted response.
inline nlohmann::json call(const std::string& id, const std::string& name, nlohmann::json args) {
  return {{"id", id}, {"name", name}, {"arguments", std::move(args)}};
}

// One scripted LLM turn: the response to replay and, optionally, what the request must hold.
inline nlohmann::json step(nlohmann::json respond, nlohmann::json expect = nlohmann::json::object()) {
  nlohmann::json s = {{"respond", std::move(respond)}};
  if (!expect.empty()) s["expect"] = std::move(expect);
  return s;
}
inline nlohmann::json text(const std::string& t) { return {{"text", t}}; }

// Sets an environment variable for the object's lifetime.
struct ForcedEnv {
  std::string name;
  ForcedEnv(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
  ~ForcedEnv() { ::unsetenv(name.c_str()); }
};

// Wall seconds of `run`, three times with the strace audit and three without (METAINFER_AGENT_AUDIT=off),
// interleaved; each list sorted, so [1] is the median. For the opt-in overhead measurements.
inline std::map<bool, std::vector<double>> audited_and_plain_walls(const std::function<void()>& run) {
  std::map<bool, std::vector<double>> wall;
  for (int rep = 0; rep < 3; ++rep)
    for (const bool audited : {false, true}) {
      std::optional<ForcedEnv> off;
      if (!audited) off.emplace("METAINFER_AGENT_AUDIT", "off");
      const auto t0 = std::chrono::steady_clock::now();
      run();
      wall[audited].push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  for (auto& [audited, v] : wall) std::sort(v.begin(), v.end());
  return wall;
}

// A small engine directory for the real verifier: one stage (basic_execution) whose test contract links the
// implementer's src/answer.cpp (`answer_cpp`, written when not empty), whose answer must be 42; its manifest names
// checkpoint `model`; plan.json holds max_context 512. The caller adds what else it needs, then hashes the contracts.
inline const char* kSmallEnginePlan = "{\"constraints\": {\"max_context\": 512}}\n";
inline void write_small_engine(const std::filesystem::path& run, const std::filesystem::path& model, const std::string& answer_cpp = "") {
  write(run / "MANIFEST.json",
        nlohmann::json{{"format", "metainfer-manifest/1"}, {"engine", "e"}, {"binary", "build/e"}, {"stages", {"basic_execution"}},
                       {"constraints", {{"model", model.string()}}}, {"files", nlohmann::json::array()}}.dump(2));
  write(run / "CMakeLists.txt", "cmake_minimum_required(VERSION 3.16)\nproject(e CXX)\nfind_package(GTest REQUIRED)\n"
                                "add_executable(e src/engine/engine_main.cpp src/answer.cpp)\n"
                                "add_executable(stage_basic_execution tests/stage_basic_execution_test.cpp src/answer.cpp)\n"
                                "target_link_libraries(stage_basic_execution GTest::gtest_main)\n");
  write(run / "tests/stage_basic_execution_test.cpp",
        "#include <gtest/gtest.h>\nint answer();\nTEST(BasicExecution, Answers) { EXPECT_EQ(answer(), 42); }\n");
  write(run / "plan.json", kSmallEnginePlan);
  write(run / "src/engine/engine_main.cpp", "int answer();\nint main() { return answer() == 42 ? 0 : 1; }\n");
  if (!answer_cpp.empty()) write(run / "src/answer.cpp", answer_cpp);
}

// An agent run in `run_dir` (the toolkit's own CKB, 30 s commands) talking to `server` over OpenAI's wire format.
inline mi::agents::AgentRun scripted_run(const std::filesystem::path& run_dir, const mi_test::ScriptedLlmServer& server) {
  mi::agents::AgentRunConfig cfg;
  cfg.sandbox.run_dir = run_dir;
  cfg.sandbox.ckb_dir = std::filesystem::path(METAINFER_SOURCE_DIR) / "ckb";
  cfg.sandbox.command_timeout_s = 30;
  mi::agents::BackendConfig bc{"openai", server.base_url() + "/v1", "scripted-model", "", false, {}};
  bc.http.timeout_s = 10;
  bc.http.retry.initial_backoff_s = 0.01;  // a script that runs out answers 500: fail fast, not after 15 s of backoff
  return mi::agents::AgentRun(cfg, mi::agents::make_backend(bc));
}
}  // namespace agents_test
