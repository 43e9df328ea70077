#include "gates/stage_source_rules.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>
#include <sstream>

#include "gates/cpp_code_text.h"

namespace mi::gates {
namespace fs = std::filesystem;

namespace {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Where the compiler finds system headers; a file under src/ at the same relative path would be found first.
const std::vector<fs::path>& system_include_dirs() {
  static const std::vector<fs::path> dirs = [] {
    std::vector<fs::path> d = {"/usr/include", "/usr/local/include"};
    std::error_code ec;
    for (const fs::path base : {fs::path("/usr/include"), fs::path("/usr/include/c++"), fs::path("/usr/include/x86_64-linux-gnu/c++"),
                                fs::path("/usr/include/aarch64-linux-gnu/c++")})
      if (fs::is_directory(base, ec))
        for (const auto& e : fs::directory_iterator(base, ec))
          if (e.is_directory(ec) && (base.filename() == "c++" || e.path().filename().string().find("-linux-gnu") != std::string::npos))
            d.push_back(e.path());
    return d;
  }();
  return dirs;
}

bool source_like(const fs::path& p) {
  static const std::vector<std::string> exts = {".h", ".hh", ".hpp", ".hxx", ".c", ".cc", ".cpp", ".cxx", ".inc", ".ipp", ".tcc", ".inl"};
  const std::string ext = lower(p.extension().string());
  return std::find(exts.begin(), exts.end(), ext) != exts.end();
}

// GoogleTest's (and GoogleMock's) macros: redefining or removing one changes what the contract's tests check.
bool gtest_macro_name(const std::string& name) {
  static const std::vector<std::string> exact = {"TEST", "TEST_F", "TEST_P", "TYPED_TEST", "TYPED_TEST_P", "FAIL", "SUCCEED",
                                                 "ADD_FAILURE", "ADD_FAILURE_AT", "SCOPED_TRACE", "RUN_ALL_TESTS", "FRIEND_TEST",
                                                 "ON_CALL", "TYPED_TEST_SUITE", "TYPED_TEST_CASE", "TYPED_TEST_SUITE_P", "TYPED_TEST_CASE_P"};
  static const std::vector<std::string> prefixes = {"EXPECT_", "ASSERT_", "GTEST_", "GMOCK_", "INSTANTIATE_", "REGISTER_TYPED_", "MOCK_"};
  if (std::find(exact.begin(), exact.end(), name) != exact.end()) return true;
  return std::any_of(prefixes.begin(), prefixes.end(), [&](const std::string& p) { return name.rfind(p, 0) == 0; });
}

// Directives in `code` (cpp_code_text) that define, undefine or save/restore a GoogleTest macro.
std::vector<std::string> macro_surgery(const std::string& code) {
  static const std::regex directive(R"((?:^|\n)[ \t]*#[ \t]*(define|undef)[ \t]+([A-Za-z_][A-Za-z0-9_]*))");
  static const std::regex pragma(R"((push_macro|pop_macro))");
  std::vector<std::string> out;
  for (auto it = std::sregex_iterator(code.begin(), code.end(), directive); it != std::sregex_iterator(); ++it)
    if (gtest_macro_name((*it)[2].str())) out.push_back("#" + (*it)[1].str() + " " + (*it)[2].str());
  // The macro a push_macro/pop_macro names is in a string (blanked in the code text): any use is refused, the engine
  // has none.
  if (std::regex_search(code, pragma)) out.push_back("#pragma push_macro/pop_macro");
  return out;
}

// Uses of GoogleTest's API, and main() definitions, in a source file's code.
std::vector<std::string> gtest_use(const std::string& raw, const std::string& code, bool entry_point) {
  std::vector<std::string> out;
  const std::string low = lower(raw);
  if (low.find("gtest") != std::string::npos) out.push_back("mentions gtest");
  if (low.find("gmock") != std::string::npos) out.push_back("mentions gmock");
  static const std::regex api(R"((?:^|[^A-Za-z0-9_])(testing\s*::|RUN_ALL_TESTS))");
  if (std::smatch m; std::regex_search(code, m, api)) out.push_back("uses GoogleTest's " + std::string(m[1].str().rfind("testing", 0) == 0 ? "testing::" : "RUN_ALL_TESTS"));
  // main: a name followed by '(' that is not a member (., ->) or a qualified name (::).
  static const std::regex main_fn(R"((?:^|[^A-Za-z0-9_.>:])main\s*\()");
  if (!entry_point && std::regex_search(code, main_fn)) out.push_back("defines or calls main() (only src/engine/engine_main.cpp may)");
  return out;
}

}  // namespace

std::vector<std::string> stage_source_problems(const fs::path& engine_dir) {
  std::vector<std::string> problems;
  std::error_code ec;
  std::vector<fs::path> files;
  for (auto it = fs::recursive_directory_iterator(engine_dir, fs::directory_options::skip_permission_denied, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path rel = it->path().lexically_relative(engine_dir);
    if (it.depth() == 0 && rel == "build" && it->is_directory()) {
      it.disable_recursion_pending();
      continue;
    }
    const std::string name = lower(it->path().filename().string());
    if (name.rfind("gtest", 0) == 0 || name.rfind("gmock", 0) == 0)
      problems.push_back(rel.generic_string() + ": named like a GoogleTest file (it would shadow GoogleTest's own on the include path)");
    if (!it->is_symlink() && it->is_regular_file()) files.push_back(it->path());
    else if (it->is_symlink() && !it->is_directory(ec)) files.push_back(it->path());  // a link to a file: judged as what it leads to
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const fs::path rel = f.lexically_relative(engine_dir);
    const std::string shown = rel.generic_string();
    const std::string top = rel.begin()->string();
    if (top == "src") {
      const fs::path in_src = rel.lexically_relative("src");
      if (f.extension().empty())
        problems.push_back(shown + ": a file without an extension on the include path would shadow a C++ library header");
      for (const auto& dir : system_include_dirs())
        if (fs::exists(dir / in_src, ec)) {
          problems.push_back(shown + ": shadows the system header " + (dir / in_src).string());
          break;
        }
    }
    if (top == "tests") continue;  // the contracts: GoogleTest's own users, protected and hash-checked
    const std::string raw = read_all(f);
    const std::string code = cpp_code_text(raw);
    for (const auto& d : macro_surgery(code)) problems.push_back(shown + ": " + d + " (GoogleTest's macros are not the engine's to change)");
    if (source_like(f))
      for (const auto& u : gtest_use(raw, code, shown == "src/engine/engine_main.cpp")) problems.push_back(shown + ": " + u);
  }
  return problems;
}

}  // namespace mi::gates
