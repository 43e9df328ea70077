#include "agents/command_paths.h"

#include <fnmatch.h>

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

bool has_wildcard(const std::string& s) { return s.find_first_of("*?[") != std::string::npos; }

fs::path canonical_or_lexical(const fs::path& p) {
  std::error_code ec;
  fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p.lexically_normal() : c;
}

// The candidate paths one word stands for: itself, what follows each '=' or ':' in it, and for an option with a path
// attached (-I/usr/include) the path.
std::vector<std::string> candidates(const std::string& word) {
  std::vector<std::string> out = {word};
  for (std::size_t i = 0; i < word.size(); ++i)
    if (word[i] == '=' || word[i] == ':') out.push_back(word.substr(i + 1));
  if (word.size() > 1 && word[0] == '-' && word.find('/') != std::string::npos) out.push_back(word.substr(word.find('/')));
  return out;
}

bool names_tree(const fs::path& absolute, const fs::path& ref, bool wildcard_reach) {
  // Split at the first segment with a wildcard; without one, the whole path is resolved and compared.
  fs::path prefix;
  std::string wildcard;
  for (const auto& part : absolute) {
    if (has_wildcard(part.string())) {
      wildcard = part.string();
      break;
    }
    prefix /= part;
  }
  const fs::path base = canonical_or_lexical(prefix);
  if (path_within(base, ref)) return true;
  if (!wildcard_reach || wildcard.empty() || !path_within(ref, base)) return false;
  // The tree lies below the fixed part: does the wildcard segment match the next segment on the way to it?
  const fs::path next = *ref.lexically_relative(base).begin();
  return ::fnmatch(wildcard.c_str(), next.c_str(), FNM_PERIOD) == 0;
}

}  // namespace

bool path_within(const fs::path& path, const fs::path& root) {
  if (path == root) return true;
  const fs::path rel = path.lexically_relative(root);
  return !rel.empty() && *rel.begin() != "..";
}

std::vector<std::string> shell_words(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  auto end_word = [&] {
    if (in_word) words.push_back(word);
    word.clear();
    in_word = false;
  };
  for (std::size_t i = 0; i < command.size(); ++i) {
    const char c = command[i];
    if (quote) {
      if (c == quote) quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < command.size()) word += command[++i];
      else word += c;
      continue;
    }
    if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
      in_word = true;
    } else if (std::string_view(" \t\n;|&<>()`").find(c) != std::string_view::npos) {
      end_word();
    } else {
      word += c;
      in_word = true;
    }
  }
  end_word();
  return words;
}

std::optional<fs::path> named_reference_tree(const std::string& command, const fs::path& cwd, const std::vector<fs::path>& references,
                                             bool wildcard_reach) {
  if (references.empty()) return std::nullopt;
  for (const std::string& word : shell_words(command))
    for (const std::string& c : candidates(word)) {
      if (c.empty()) continue;
      const fs::path absolute = fs::path(c).is_absolute() ? fs::path(c) : cwd / c;
      for (const fs::path& ref : references)
        if (names_tree(absolute, ref, wildcard_reach)) return ref;
    }
  return std::nullopt;
}

bool wildcard_may_name(const std::string& command, const fs::path& cwd, const fs::path& path) {
  const fs::path target = path.lexically_normal();
  for (const std::string& word : shell_words(command))
    for (const std::string& c : candidates(word)) {
      if (!has_wildcard(c)) continue;
      const fs::path pattern = (fs::path(c).is_absolute() ? fs::path(c) : cwd / c).lexically_normal();
      auto p = pattern.begin(), t = target.begin();
      bool match = true;
      for (; p != pattern.end() && t != target.end(); ++p, ++t)
        if (p->empty() != t->empty() || ::fnmatch(p->c_str(), t->c_str(), FNM_PERIOD) != 0) {
          match = false;
          break;
        }
      // A trailing '/' leaves an empty last segment: "dir/*/" names directories only, still the same depth.
      if (match && p != pattern.end() && p->empty()) ++p;
      if (match && p == pattern.end() && t == target.end()) return true;
    }
  return false;
}

}  // namespace mi::agents
