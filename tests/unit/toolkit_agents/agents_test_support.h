// Small helpers the agent tests share: files in a run directory and the scripted endpoint's tool-call objects.
#pragma once
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

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
}  // namespace agents_test
