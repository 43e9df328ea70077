// Small helpers the agent tests share: files in a run directory, the scripted endpoint's tool-call objects, and an
// agent run in a run directory against the scripted endpoint.
#pragma once
#include <filesystem>
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
