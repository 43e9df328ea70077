#include "agents/protected_files.h"

#include <fstream>

#include <nlohmann/json.hpp>

#include "agents/command_journal.h"
#include "agents/path_glob.h"
#include "common/error.h"
#include "generator/manifest.h"

namespace mi::agents {
namespace fs = std::filesystem;

const std::vector<std::string>& default_protected_globs() {
  static const std::vector<std::string> globs = {"tests/**", "gates/**", "test_contracts/**", "MANIFEST.json", "CMakeLists.txt",
                                                     "plan.json"};
  return globs;
}

const std::vector<std::string>& workflow_record_globs() {
  static const std::vector<std::string> globs = {".metainfer/**", "transcripts/**", "reports/**", "metrics.json", "summary.md"};
  return globs;
}

const std::vector<std::string>& hidden_record_globs() {
  static const std::vector<std::string> globs = {".metainfer/**", "transcripts/**", "metrics.json", "summary.md"};
  return globs;
}

bool is_hidden_record(const std::string& rel) { return path_glob_any(hidden_record_globs(), rel); }

namespace {

// Each glob's part before its first wildcard, as a path under run_dir.
std::vector<fs::path> fixed_parts(const fs::path& run_dir, const std::vector<std::string>& globs) {
  std::vector<fs::path> out;
  for (const auto& g : globs) {
    std::string fixed = g.substr(0, g.find_first_of("*?"));
    if (fixed.size() != g.size()) fixed = fixed.substr(0, fixed.find_last_of('/') == std::string::npos ? 0 : fixed.find_last_of('/'));
    if (!fixed.empty()) out.push_back(run_dir / fixed);
  }
  return out;
}

}  // namespace

std::vector<fs::path> hidden_record_paths(const fs::path& run_dir) { return fixed_parts(run_dir, hidden_record_globs()); }

std::vector<fs::path> protected_mount_points(const fs::path& run_dir) {
  std::vector<std::string> globs = default_protected_globs();
  for (const auto& g : workflow_record_globs()) globs.push_back(g);
  return fixed_parts(run_dir, globs);
}

fs::path protected_manifest_path(const fs::path& run_dir) { return run_dir / ".metainfer" / "protected.json"; }

ProtectedManifest snapshot_protected(const fs::path& run_dir, const std::vector<std::string>& globs) {
  ProtectedManifest m;
  const fs::path manifest = protected_manifest_path(run_dir);
  for (auto it = fs::recursive_directory_iterator(run_dir); it != fs::recursive_directory_iterator(); ++it) {
    const fs::path& p = it->path();
    if (p == manifest) continue;  // the manifest cannot hash itself
    const bool link = it->is_symlink();
    if (!link && !it->is_regular_file()) continue;
    const std::string rel = p.lexically_relative(run_dir).generic_string();
    if (!path_glob_any(globs, rel)) continue;
    m.sha256[rel] = link ? "symlink:" + fs::read_symlink(p).string() : generator::sha256_file(p);
  }
  return m;
}

void write_protected_manifest(const fs::path& file, const ProtectedManifest& m) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file);
  out << nlohmann::json(m.sha256).dump(2) << "\n";
  if (!out) fail(file.string(), ": cannot write");
}

ProtectedManifest read_protected_manifest(const fs::path& file) {
  std::ifstream in(file);
  if (!in) fail(file.string(), ": no protected-file manifest (the workflow writes it when it lays down the test contracts)");
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail(file.string(), ": not a JSON object of path -> sha256");
  ProtectedManifest m;
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string()) fail(file.string(), ": field '", k, "': expected a sha256 string");
    m.sha256[k] = v.get<std::string>();
  }
  return m;
}

TamperReport check_protected(const fs::path& run_dir, const ProtectedManifest& expected, const std::vector<std::string>& globs) {
  const ProtectedManifest now = snapshot_protected(run_dir, globs);
  TamperReport r;
  for (const auto& [path, hash] : expected.sha256) {
    const auto it = now.sha256.find(path);
    if (it == now.sha256.end()) r.missing.push_back(path);
    else if (it->second != hash) r.modified.push_back(path);
  }
  for (const auto& [path, hash] : now.sha256)
    if (!expected.sha256.count(path)) r.added.push_back(path);
  return r;
}

std::string TamperReport::describe() const {
  std::string s;
  auto list = [&](const char* what, const std::vector<std::string>& v) {
    for (const auto& p : v) s += std::string(s.empty() ? "" : ", ") + what + " " + p;
  };
  list("modified", modified);
  list("missing", missing);
  list("added", added);
  return s.empty() ? "clean" : s;
}

void require_untampered(const fs::path& run_dir, const std::vector<std::string>& globs) {
  // A command whose process died mid-run left changes nobody judged (command_journal.h): a sandbox opened on the run
  // directory judges them; until then no gate runs.
  if (fs::exists(command_journal_path(run_dir)))
    fail(run_dir.string(), ": a command was interrupted and what it changed has not been judged yet (",
         command_journal_path(run_dir).string(), "); refusing to run the gates");
  const ProtectedManifest expected = read_protected_manifest(protected_manifest_path(run_dir));
  const TamperReport r = check_protected(run_dir, expected, globs);
  if (!r.clean()) fail(run_dir.string(), ": protected files changed since the workflow wrote them (", r.describe(), "); refusing to run the gates");
}

}  // namespace mi::agents
