#include "agents/withheld_sources.h"

#include "agents/command_paths.h"
#include "agents/path_glob.h"
#include "agents/protected_files.h"
#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;

std::vector<std::string> withhold_sources(const fs::path& run_dir, const std::vector<std::string>& files) {
  for (const std::string& f : files) {
    const fs::path rel = fs::path(f).lexically_normal();
    if (rel.empty() || rel.is_absolute() || *rel.begin() == "..")
      fail("withhold_sources: ", f, " is not a path inside the run directory");
    if (path_glob_any(default_protected_globs(), rel.generic_string()) || path_glob_any(workflow_record_globs(), rel.generic_string()))
      fail("withhold_sources: ", f, " is protected (a test contract, gate script, manifest or record), not a source to withhold");
  }
  // A directory an agent replaced with a symlink must not lead the removal outside the run directory.
  const fs::path root = fs::canonical(run_dir);
  std::vector<std::string> removed;
  for (const std::string& f : files) {
    std::error_code ec;
    const fs::path parent = fs::weakly_canonical(root / fs::path(f).parent_path(), ec);
    if (ec || !path_within(parent, root)) fail("withhold_sources: ", f, " leads outside the run directory");
    if (fs::remove(parent / fs::path(f).filename(), ec) && !ec) removed.push_back(f);
  }
  return removed;
}

}  // namespace mi::agents
