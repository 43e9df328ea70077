// Files of a run directory whose text carries a foreign-framework signature (source_switch.h), so that shell
// commands never see them. read_file refuses such a file, but a command given the file could re-encode it past any
// filter of its output (base64, tr, grep -v, a compressor): the only safe place to stop it is before the command
// runs. The sandbox hides every such file from commands (/dev/null is mounted over it: with bubblewrap's nodev
// mounts it cannot even be opened) and refuses, as a counted violation, a command that names one.
//
// Every regular file under the run directory is scanned, build trees, .git and files of any size included (large
// ones in chunks, so a signature in a 1 GiB file is found too). The scan is memoised per file by device, inode, size
// and modification time, so a run directory is read once and then only what changed.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "agents/source_switch.h"

namespace mi::agents {

// The first foreign signature in the file's bytes, read in chunks (a marker split across two chunks is found).
std::optional<ForeignSignature> find_foreign_signature_in_file(const std::filesystem::path& file);

// The files under `dir` that carry a foreign signature, as paths under `dir` (one scan, nothing memoised): what the
// gates hide from the agent-written code they run.
std::vector<std::filesystem::path> signature_file_paths(const std::filesystem::path& dir);

class SignatureFileScan {
 public:
  // run-directory-relative path -> the signature it carries, for every regular file under `run_dir` that carries
  // one (symlinks are not followed: what they lead to inside the run directory is scanned as itself).
  std::map<std::string, ForeignSignature> scan(const std::filesystem::path& run_dir);

 private:
  using Stamp = std::tuple<std::uintmax_t, std::uintmax_t, std::uintmax_t, std::int64_t>;  // dev, ino, size, mtime ns
  std::map<std::string, std::pair<Stamp, std::optional<ForeignSignature>>> memo_;
};

}  // namespace mi::agents
