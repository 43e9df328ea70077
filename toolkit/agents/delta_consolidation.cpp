#include "agents/delta_consolidation.h"

#include <atomic>
#include <unistd.h>

#include "agents/ckb_delta.h"

namespace mi::agents {
namespace fs = std::filesystem;

std::string Consolidation::describe() const {
  std::string s;
  if (empty_delta) s += "the delta holds no file\n";
  for (const auto& r : refused) s += "outside the knowledge layers: " + r + "\n";
  for (const auto& e : lint_errors) s += "adds a lint error: " + e + "\n";
  return s;
}

Consolidation consolidate_delta(const fs::path& delta_dir, const fs::path& ckb_dir, const fs::path& repo_root,
                                const std::string& round, const std::vector<std::string>& evidence) {
  Consolidation c;
  c.empty_delta = delta_files(delta_dir).empty();
  c.refused = refused_delta_files(delta_dir, ckb_dir);
  if (!c.accepted()) return c;
  // Lint against the CKB as it is now, in a scratch copy that is always removed.
  static std::atomic<int> counter{0};
  const fs::path staged = fs::temp_directory_path() /
                          ("metainfer-consolidate-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  try {
    stage_ckb(ckb_dir, delta_dir, staged);
    c.lint_errors = new_lint_errors(ckb_dir, staged, repo_root);
  } catch (...) {
    fs::remove_all(staged);
    throw;
  }
  fs::remove_all(staged);
  if (c.accepted()) c.merged = merge_delta(delta_dir, ckb_dir, round, evidence);
  return c;
}

}  // namespace mi::agents
