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

// The directories of the CKB's knowledge layers, the only ones a delta may write: contracts, framework, families,
// platforms, signals and experience, named as <ckb_dir>/ckb.toml's [layers] names them (their keys when the CKB has
// no ckb.toml). Roles (the agents' grants), test contracts (the gate bounds), ckb.toml and the evolution log are
// the workflow's and the verifier's: an agent that could write them could widen its own permissions or loosen the
// gates that judge it.
std::vector<std::string> knowledge_layer_dirs(const std::filesystem::path& ckb_dir);

// For each delta file outside the knowledge layers of `ckb_dir`: "<path>: <why>". Empty when the delta may be staged.
std::vector<std::string> refused_delta_files(const std::filesystem::path& delta_dir, const std::filesystem::path& ckb_dir);

// Copies `ckb_dir` to `staged_dir` (replaced if present) and lays the delta over it. Throws mi::Error, before
// copying anything, when a delta file lies outside the knowledge layers.
void stage_ckb(const std::filesystem::path& ckb_dir, const std::filesystem::path& delta_dir, const std::filesystem::path& staged_dir);

// Lint errors the staged CKB has and the base CKB has not (a CKB that no longer loads is one error naming why).
std::vector<std::string> new_lint_errors(const std::filesystem::path& base_ckb, const std::filesystem::path& staged_ckb,
                                         const std::filesystem::path& repo_root);

// Copies the delta into `ckb_dir`. TOML and Markdown files get a first line naming the round and the evidence
// ("# evolved in evo-001; evidence: ..."); <ckb_dir>/evolution/log.toml gets a [[round]] with every file, its
// sha256 and whether it was added or replaced an entry. Returns the merged files. Throws mi::Error, before writing
// anything, when a delta file lies outside the knowledge layers.
std::vector<std::string> merge_delta(const std::filesystem::path& delta_dir, const std::filesystem::path& ckb_dir,
                                     const std::string& round, const std::vector<std::string>& evidence);

}  // namespace mi::agents
