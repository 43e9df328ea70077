// An implementer writes its stage's sources; it does not inherit them. When a stage starts (`generate --backend
// agents`), or when a run directory is laid down for one (`evolve` over an engine directory), the files that
// implement the stage's contracts are removed from the run directory, so the stage gate fails until the implementer
// has written them: an implementer that does nothing cannot pass. The other stages' sources stay, drafted from the
// CKB's components, because B0 builds the whole engine: what the implementer writes must fit the interfaces they
// include. The draft of a withheld file is kept nowhere an agent can read.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::agents {

// Removes `files` (run-directory relative) from `run_dir`; returns those that were there. Throws mi::Error, before
// removing anything, for a path that leaves the run directory or is protected (a test contract, a gate script, the
// manifest, a workflow record): those are never the implementer's to write.
std::vector<std::string> withhold_sources(const std::filesystem::path& run_dir, const std::vector<std::string>& files);

}  // namespace mi::agents
