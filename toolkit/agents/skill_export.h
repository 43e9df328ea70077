// `metainfer skill export DIR`: the workflow packaged in the Agent Skill format, for users who drive it from an
// agent harness instead of our orchestrator. The skill is DIR/metainfer/ (a skill's directory is named after it):
//   SKILL.md                YAML front matter (name, description: what it does and when to use it; metadata) and
//                           the workflow: coverage -> generation or evolution -> gates -> consolidation, with the
//                           rules the harness must keep (roles separated, source switch, only gates decide)
//   references/roles/*.md   one file per LLM role from the CKB: its prompt, its tools and where it may write
//   scripts/*.sh            thin wrappers that call `metainfer` (coverage, generate, verify, ckb check, protect and
//                           check the test contracts), so every decision is made by our code, not by the harness
// The harness cannot be forced to respect the sandbox; SKILL.md says so, and the scripts keep the checks that matter
// (gates, the protected-file hashes, lint) in metainfer.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::agents {

// Writes the skill; returns its directory. `metainfer_binary` is the path scripts use when $METAINFER is unset.
// Throws mi::Error when DIR/metainfer exists and is not empty.
std::filesystem::path export_skill(const std::filesystem::path& dir, const std::filesystem::path& ckb_dir,
                                   const std::filesystem::path& metainfer_binary);

// The skill's name: lowercase letters, digits and hyphens, as the format requires; also its directory name.
inline constexpr const char* kSkillName = "metainfer";

}  // namespace mi::agents
