// The role table as data, one file per row: ckb/roles/<id>.toml, the one source of truth for roles (the paper's
// Table 7). An LLM role (kind "llm", the default) holds its responsibility, what it may not do, its system prompt, the
// exact tools the sandbox grants it and the run-directory paths it may write. Separation between roles is a property
// of these grants, enforced by the tool sandbox, not of prompt wording. The verifier's row is kind "code": it is the
// gate runner (`runs`, toolkit/gates), code that no LLM drives, with no prompt and no tools, and the only role that
// may declare PASS or FAIL.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::agents {

struct AgentRoleSpec {
  std::filesystem::path source;
  std::string id, title, prompt;
  std::string kind = "llm";                // "llm" | "code" (the verifier)
  std::string runs;                        // kind "code": the command that is the role
  std::string responsibility;
  std::vector<std::string> may_not;        // the paper's "may not" column; lint reads "declare PASS or FAIL" here
  std::vector<std::string> tools;        // names from tool_catalog()
  std::vector<std::string> write_paths;  // path globs relative to the run directory

  bool has_tool(const std::string& name) const;
  bool is_llm() const { return kind == "llm"; }
};

// The LLM roles the workflow schedules; lint requires a file for each (and the verifier's code row).
const std::vector<std::string>& required_role_ids();
inline constexpr const char* kVerifierRole = "verifier";
// Only this role may read reference sources, and only with SWITCH=ON (tool_sandbox enforces it by id).
inline constexpr const char* kReferenceReaderRole = "explorer";

// Throws mi::Error naming the file and field for a malformed file (missing key, wrong type).
AgentRoleSpec load_role(const std::filesystem::path& file);
// Every *.toml in `dir` (LLM and code rows), sorted by file name; an absent directory gives none.
std::vector<AgentRoleSpec> load_roles(const std::filesystem::path& dir);
// The LLM role `id` from `dir`, to start a conversation with; throws mi::Error when there is none, or when `id` is a
// code row (no LLM may play the verifier).
AgentRoleSpec find_role(const std::filesystem::path& dir, const std::string& id);

}  // namespace mi::agents
