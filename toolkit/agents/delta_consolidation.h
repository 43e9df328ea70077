// Consolidation: the one path by which a CKB delta enters the knowledge base. `metainfer evolve` takes it in a
// round's merge phase (after the candidate and the SWITCH=OFF regeneration passed their gates), and `metainfer
// agents consolidate` (the exported skill's scripts/consolidate.sh) takes it for a harness that ran those gates
// itself. Nothing is written unless every check passes:
//   the delta holds files, and only in the CKB's knowledge layers (ckb_delta.h);
//   laid over a copy of the CKB as it is now, it adds no lint error (the CKB may have moved since it was staged);
// then merge_delta: each file tagged with the round and its evidence, the round appended to evolution/log.toml.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::agents {

struct Consolidation {
  std::vector<std::string> merged;       // the files written into the CKB (empty when refused)
  std::vector<std::string> refused;      // delta files outside the knowledge layers, each with why
  std::vector<std::string> lint_errors;  // lint errors the delta would add
  bool empty_delta = false;
  bool accepted() const { return !empty_delta && refused.empty() && lint_errors.empty(); }
  std::string describe() const;          // why it was refused, one line per reason
};

Consolidation consolidate_delta(const std::filesystem::path& delta_dir, const std::filesystem::path& ckb_dir,
                                const std::filesystem::path& repo_root, const std::string& round,
                                const std::vector<std::string>& evidence);

}  // namespace mi::agents
