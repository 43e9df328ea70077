#include "agents/ckb_delta.h"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "ckb/ckb.h"
#include "ckb/lint.h"
#include "common/error.h"
#include "generator/manifest.h"

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// TOML strings need their quotes and backslashes escaped.
std::string toml_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::set<std::string> lint_errors(const fs::path& ckb_dir, const fs::path& repo_root) {
  std::set<std::string> errors;
  try {
    for (const auto& f : ckb::lint(ckb::load(ckb_dir), repo_root))
      if (f.severity == "error") errors.insert(f.file + ": " + f.field + ": " + f.message);
  } catch (const Error& e) {
    // Paths in load errors name the directory; strip it so base and staged compare equal.
    std::string m = e.what();
    for (std::size_t at; (at = m.find(ckb_dir.string())) != std::string::npos;) m.replace(at, ckb_dir.string().size(), "<ckb>");
    errors.insert("the CKB does not load: " + m);
  }
  return errors;
}

const std::vector<std::string> kKnowledgeLayers = {"contracts", "framework", "families", "platforms", "signals", "experience"};

void require_knowledge_only(const fs::path& delta_dir, const fs::path& ckb_dir) {
  const std::vector<std::string> refused = refused_delta_files(delta_dir, ckb_dir);
  if (refused.empty()) return;
  std::string detail;
  for (const auto& r : refused) detail += "\n  " + r;
  fail(delta_dir.string(), ": the delta writes outside the CKB's knowledge layers:", detail);
}

}  // namespace

std::vector<std::string> knowledge_layer_dirs(const fs::path& ckb_dir) {
  toml::table index, layers;
  if (fs::is_regular_file(ckb_dir / "ckb.toml")) {
    try {
      index = toml::parse_file((ckb_dir / "ckb.toml").string());
    } catch (const toml::parse_error& e) {
      fail((ckb_dir / "ckb.toml").string(), ": ", e.description());
    }
    if (const toml::table* t = index["layers"].as_table()) layers = *t;
  }
  std::vector<std::string> dirs;
  for (const auto& key : kKnowledgeLayers) {
    const auto named = layers[key].value<std::string>();
    dirs.push_back(named && !named->empty() ? fs::path(*named).lexically_normal().generic_string() : key);
  }
  return dirs;
}

std::vector<std::string> refused_delta_files(const fs::path& delta_dir, const fs::path& ckb_dir) {
  const std::vector<std::string> layers = knowledge_layer_dirs(ckb_dir);
  std::string allowed;
  for (const auto& l : layers) allowed += (allowed.empty() ? "" : ", ") + l + "/";
  std::vector<std::string> refused;
  for (const auto& rel : delta_files(delta_dir)) {
    bool inside = false;
    for (const auto& l : layers) inside = inside || rel.rfind(l + "/", 0) == 0;
    if (!inside) refused.push_back(rel + ": not in a knowledge layer (a delta may write only " + allowed + ")");
  }
  return refused;
}

std::vector<std::string> delta_files(const fs::path& delta_dir) {
  std::vector<std::string> out;
  if (!fs::is_directory(delta_dir)) return out;
  for (auto it = fs::recursive_directory_iterator(delta_dir); it != fs::recursive_directory_iterator(); ++it) {
    const std::string rel = it->path().lexically_relative(delta_dir).generic_string();
    if (it->is_symlink()) fail(delta_dir.string(), ": ", rel, " is a symlink; a CKB delta is plain files");
    if (!it->is_regular_file()) continue;
    if (rel.empty() || rel.rfind("..", 0) == 0) fail(delta_dir.string(), ": bad delta path ", rel);
    out.push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

void stage_ckb(const fs::path& ckb_dir, const fs::path& delta_dir, const fs::path& staged_dir) {
  require_knowledge_only(delta_dir, ckb_dir);
  fs::remove_all(staged_dir);
  fs::create_directories(staged_dir.parent_path());
  fs::copy(ckb_dir, staged_dir, fs::copy_options::recursive);
  for (const auto& rel : delta_files(delta_dir)) {
    fs::create_directories((staged_dir / rel).parent_path());
    fs::copy_file(delta_dir / rel, staged_dir / rel, fs::copy_options::overwrite_existing);
  }
}

std::vector<std::string> new_lint_errors(const fs::path& base_ckb, const fs::path& staged_ckb, const fs::path& repo_root) {
  const auto before = lint_errors(base_ckb, repo_root);
  std::vector<std::string> added;
  for (const auto& e : lint_errors(staged_ckb, repo_root))
    if (!before.count(e)) added.push_back(e);
  return added;
}

std::vector<std::string> merge_delta(const fs::path& delta_dir, const fs::path& ckb_dir, const std::string& round,
                                     const std::vector<std::string>& evidence) {
  // The workflow refuses such a delta at consolidation; checked again here because this is the write into the CKB.
  require_knowledge_only(delta_dir, ckb_dir);
  std::string evidence_text;
  for (const auto& e : evidence) evidence_text += (evidence_text.empty() ? "" : ", ") + e;
  const std::vector<std::string> files = delta_files(delta_dir);
  std::string log = "\n[[round]]\nid = " + toml_string(round) + "\nevidence = [";
  for (std::size_t i = 0; i < evidence.size(); ++i) log += (i ? ", " : "") + toml_string(evidence[i]);
  log += "]\nfiles = [\n";
  for (const auto& rel : files) {
    std::string text = read_all(delta_dir / rel);
    const std::string ext = fs::path(rel).extension().string();
    const std::string tag = "evolved in " + round + "; evidence: " + evidence_text;
    if (ext == ".toml") text = "# " + tag + "\n" + text;
    else if (ext == ".md") text = "<!-- " + tag + " -->\n" + text;
    const bool replaced = fs::exists(ckb_dir / rel);  // a delta may revise an entry; the log says which it did
    fs::create_directories((ckb_dir / rel).parent_path());
    std::ofstream out(ckb_dir / rel, std::ios::binary | std::ios::trunc);
    out << text;
    if (!out) fail((ckb_dir / rel).string(), ": cannot write");
    log += "  { path = " + toml_string(rel) + ", sha256 = " + toml_string(generator::sha256_hex(text)) +
           ", change = " + (replaced ? "\"replaced\"" : "\"added\"") + " },\n";
  }
  log += "]\n";
  fs::create_directories(ckb_dir / "evolution");
  // A merge interrupted after this point and run again (a resumed round) rewrites the same files; the round is
  // logged once.
  const fs::path log_file = ckb_dir / "evolution" / "log.toml";
  if (read_all(log_file).find("\nid = " + toml_string(round) + "\n") == std::string::npos)
    std::ofstream(log_file, std::ios::app) << log;
  return files;
}

}  // namespace mi::agents
