// A staged CKB delta: the files the consolidator wrote under <run>/ckb_delta/, laid over a copy of the CKB. The
// evolution loop generates and regenerates against the staged copy, and merges the delta into the real CKB only
// after the SWITCH=OFF regeneration passed its gates; each merged file is tagged with the round and its evidence,
// and the round is appended to <ckb>/evolution/log.toml.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::agents {

// The delta's files, relative to the delta root, sorted. Throws mi::Error for a path that would leave the CKB
// (absolute, "..") or a symlink (a delta is plain files).
std::vector<std::string> delta_files(const std::filesystem::path& delta_dir);

// Copies `ckb_dir` to `staged_dir` (replaced if present) and lays the delta over it.
void stage_ckb(const std::filesystem::path& ckb_dir, const std::filesystem::path& delta_dir, const std::filesystem::path& staged_dir);

// Lint errors the staged CKB has and the base CKB has not (a CKB that no longer loads is one error naming why).
std::vector<std::string> new_lint_errors(const std::filesystem::path& base_ckb, const std::filesystem::path& staged_ckb,
                                         const std::filesystem::path& repo_root);

// Copies the delta into `ckb_dir`. TOML and Markdown files get a first line naming the round and the evidence
// ("# evolved in evo-001; evidence: ..."); <ckb_dir>/evolution/log.toml gets a [[round]] with every file, its
// sha256 and whether it was added or replaced an entry. Returns the merged files.
std::vector<std::string> merge_delta(const std::filesystem::path& delta_dir, const std::filesystem::path& ckb_dir,
                                     const std::string& round, const std::vector<std::string>& evidence);

}  // namespace mi::agents
