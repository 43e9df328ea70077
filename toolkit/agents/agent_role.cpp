#include "agents/agent_role.h"

#include <algorithm>

#include <toml++/toml.h>

#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;

bool AgentRoleSpec::has_tool(const std::string& name) const {
  return std::find(tools.begin(), tools.end(), name) != tools.end();
}

const std::vector<std::string>& required_role_ids() {
  static const std::vector<std::string> ids = {"orchestrator", "explorer", "implementer", "spec_reviewer",
                                               "consolidator", "failure_analyst", "experiment_summariser"};
  return ids;
}

AgentRoleSpec load_role(const fs::path& file) {
  toml::table t;
  try {
    t = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    fail(file.string(), ": ", std::string(e.description()));
  }
  auto str = [&](const char* key, bool required) {
    const auto v = t[key].value_exact<std::string>();
    if (!v && (required || t.contains(key))) fail(file.string(), ": field '", key, "': expected a string");
    return v.value_or("");
  };
  auto strings = [&](const char* key) {
    std::vector<std::string> out;
    if (!t.contains(key)) return out;
    const toml::array* a = t[key].as_array();
    if (!a) fail(file.string(), ": field '", key, "': expected an array of strings");
    for (std::size_t i = 0; i < a->size(); ++i) {
      const auto s = (*a)[i].value_exact<std::string>();
      if (!s) fail(file.string(), ": field '", key, "[", i, "]': expected a string");
      out.push_back(*s);
    }
    return out;
  };
  AgentRoleSpec r;
  r.source = file;
  r.id = str("id", true);
  r.title = str("title", true);
  r.kind = t.contains("kind") ? str("kind", true) : "llm";
  r.responsibility = str("responsibility", true);
  r.may_not = strings("may_not");
  for (const auto& [k, v] : t)
    if (k != "id" && k != "title" && k != "kind" && k != "runs" && k != "responsibility" && k != "may_not" && k != "prompt" &&
        k != "tools" && k != "write_paths")
      fail(file.string(), ": unknown field '", std::string(k.str()), "'");
  if (r.kind == "code") {
    // A code row is run by the workflow, never prompted: a prompt or a tool grant would make it an LLM in disguise.
    for (const char* key : {"prompt", "tools", "write_paths"})
      if (t.contains(key)) fail(file.string(), ": field '", key, "': a role of kind \"code\" has none (no LLM plays it)");
    r.runs = str("runs", true);
    return r;
  }
  if (r.kind != "llm") fail(file.string(), ": field 'kind': expected \"llm\" or \"code\", got \"", r.kind, "\"");
  if (t.contains("runs")) fail(file.string(), ": field 'runs': only a role of kind \"code\" runs a command");
  r.prompt = str("prompt", true);
  if (!t.contains("tools")) fail(file.string(), ": field 'tools': expected an array of strings");
  r.tools = strings("tools");
  r.write_paths = strings("write_paths");
  return r;
}

std::vector<AgentRoleSpec> load_roles(const fs::path& dir) {
  std::vector<fs::path> files;
  if (fs::is_directory(dir))
    for (const auto& e : fs::directory_iterator(dir))
      if (e.is_regular_file() && e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<AgentRoleSpec> roles;
  for (const auto& f : files) roles.push_back(load_role(f));
  return roles;
}

AgentRoleSpec find_role(const fs::path& dir, const std::string& id) {
  for (auto& r : load_roles(dir))
    if (r.id == id) {
      if (!r.is_llm())
        fail(r.source.string(), ": role '", id, "' is not an LLM role: it is code (", r.runs, "), and no LLM may play it");
      return r;
    }
  fail(dir.string(), ": no role '", id, "'");
}

}  // namespace mi::agents
