#include "agents/system_references.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <set>

#include "agents/signature_files.h"

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

const std::vector<std::string>& framework_names() {
  static const std::vector<std::string> names = {"vllm", "sglang", "transformers", "llama_cpp", "llama.cpp", "gguf", "ggml"};
  return names;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

bool framework_name(const std::string& name) {
  const std::string n = lower(name);
  return std::find(framework_names().begin(), framework_names().end(), n) != framework_names().end();
}

// A framework's name, alone or followed by a version or variant: "vllm", "vllm-0.6.3", "llama.cpp_b4000",
// "gguf-0.10.0-py3.11.egg".
bool framework_named(const std::string& name) {
  const std::string n = lower(name);
  for (const auto& f : framework_names())
    if (n == f || (n.rfind(f, 0) == 0 && (n[f.size()] == '-' || n[f.size()] == '_' || n[f.size()] == '.'))) return true;
  return false;
}

std::vector<fs::path> entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, fs::directory_options::skip_permission_denied, ec); !ec && it != fs::directory_iterator();
       it.increment(ec))
    out.push_back(it->path());
  return out;
}

// Python's package directories under root: usr/{,local/}{lib,lib64}/python3*/{site,dist}-packages.
std::vector<fs::path> python_package_dirs(const fs::path& root) {
  std::vector<fs::path> out;
  for (const char* lib : {"usr/lib", "usr/local/lib", "usr/lib64", "usr/local/lib64"})
    for (const auto& py : entries(root / lib))
      if (py.filename().string().rfind("python3", 0) == 0)
        for (const char* sub : {"site-packages", "dist-packages"})
          if (std::error_code ec; fs::is_directory(py / sub, ec)) out.push_back(py / sub);
  return out;
}

// Whether a file in a bin directory is a script (a text program: "#!" first, or a .py / .sh name), whose text a
// signature scan can judge; compiled programs are not sources.
bool script_file(const fs::path& file) {
  const std::string ext = file.extension().string();
  if (ext == ".py" || ext == ".sh") return true;
  std::ifstream in(file, std::ios::binary);
  char head[2] = {0, 0};
  in.read(head, 2);
  return in.gcount() == 2 && head[0] == '#' && head[1] == '!';
}

}  // namespace

std::vector<fs::path> system_reference_trees(const fs::path& root) {
  std::set<fs::path> found;
  std::error_code ec;
  // One entry of a Python package directory (or of an egg directory inside one).
  const auto package_entry = [&](const fs::path& e) {
    const std::string name = e.filename().string();
    const bool dir = fs::is_directory(fs::symlink_status(e, ec));
    // A package directory by its name or its __init__.py; a module by its name or its text.
    const std::string stem = dir ? name : e.stem().string();
    if (framework_name(stem) && (dir || e.extension() == ".py")) found.insert(e);
    else if (dir && fs::is_regular_file(e / "__init__.py", ec) && find_foreign_signature_in_file(e / "__init__.py")) found.insert(e);
    else if (!dir && e.extension() == ".py" && find_foreign_signature_in_file(e)) found.insert(e);
  };
  for (const auto& packages : python_package_dirs(root))
    for (const auto& e : entries(packages)) {
      // An egg install (easy_install, setup.py install): the packages sit one level down, in <name>-<version>.egg/.
      if (e.extension() == ".egg" && fs::is_directory(fs::symlink_status(e, ec)))
        for (const auto& inner : entries(e)) package_entry(inner);
      else if (e.extension() == ".egg" && framework_named(e.filename().string()))
        found.insert(e);  // a zipped egg: a zip of the package's sources, judged by its name (its text is compressed)
      else package_entry(e);
    }
  for (const char* base : {"usr/share", "usr/local/share", "usr/include", "usr/local/include", "usr/lib", "usr/local/lib", "usr/src",
                           "usr/local/src"})
    for (const auto& e : entries(root / base))
      if (framework_named(e.filename().string())) found.insert(e);
  for (const char* include : {"usr/include", "usr/local/include"})
    for (const auto& e : entries(root / include)) {
      const std::string name = lower(e.filename().string());
      if (e.extension() == ".h" && (name.rfind("ggml", 0) == 0 || name.rfind("llama", 0) == 0 || name.rfind("gguf", 0) == 0)) found.insert(e);
    }
  // Scripts installed as programs: llama.cpp's `cmake --install` puts convert_hf_to_gguf.py (thousands of lines of its
  // source) in ${CMAKE_INSTALL_BINDIR}; pip's console scripts import their framework. Each script is read whole.
  for (const char* bin : {"usr/bin", "usr/sbin", "usr/local/bin", "usr/local/sbin"})
    for (const auto& e : entries(root / bin))
      if (fs::is_regular_file(e, ec) && script_file(e) && find_foreign_signature_in_file(e)) found.insert(e);
  return {found.begin(), found.end()};
}

const std::vector<fs::path>& host_system_reference_trees() {
  static const std::vector<fs::path> trees = system_reference_trees("/");
  return trees;
}

void append_bwrap_hides(std::vector<std::string>& argv, const std::vector<fs::path>& paths) {
  for (const auto& p : paths) {
    std::error_code ec;
    // A symlink cannot be mounted over (bubblewrap aborts: every command would fail); what it leads to is covered,
    // so the link reads as the cover (or dangles, where the target is outside what the sandbox shows).
    const fs::path h = fs::is_symlink(p, ec) ? fs::canonical(p, ec) : p;
    if (ec || h.empty()) continue;  // a dangling link: nothing to read through it
    if (fs::is_directory(h, ec)) argv.insert(argv.end(), {"--tmpfs", h.string()});
    else if (fs::exists(h, ec)) argv.insert(argv.end(), {"--ro-bind", "/dev/null", h.string()});
  }
}

}  // namespace mi::agents
