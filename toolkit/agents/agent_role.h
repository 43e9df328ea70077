// An LLM role as data: ckb/roles/<id>.toml holds its system prompt, the exact tools the sandbox grants it and the
// run-directory paths it may write. Separation between roles is a property of these grants, enforced by the tool
// sandbox, not of prompt wording. The verifier is not here: it is the gate runner (toolkit/gates), code that no
// LLM drives, and the only thing that declares PASS or FAIL.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::agents {

struct AgentRoleSpec {
  std::filesystem::path source;
  std::string id, title, prompt;
  std::vector<std::string> tools;        // names from tool_catalog()
  std::vector<std::string> write_paths;  // path globs relative to the run directory

  bool has_tool(const std::string& name) const;
};

// The roles the workflow schedules; lint requires a file for each.
const std::vector<std::string>& required_role_ids();
// Only this role may read reference sources, and only with SWITCH=ON (tool_sandbox enforces it by id).
inline constexpr const char* kReferenceReaderRole = "explorer";

// Throws mi::Error naming the file and field for a malformed file (missing key, wrong type).
AgentRoleSpec load_role(const std::filesystem::path& file);
// Every *.toml in `dir`, sorted by file name; an absent directory gives none.
std::vector<AgentRoleSpec> load_roles(const std::filesystem::path& dir);
// The role `id` from `dir`; throws mi::Error when there is none.
AgentRoleSpec find_role(const std::filesystem::path& dir, const std::string& id);

}  // namespace mi::agents
