#include "agents/path_glob.h"

#include <string_view>

namespace mi::agents {
namespace {

std::vector<std::string_view> segments(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t end = std::min(s.find('/', start), s.size());
    if (end > start) out.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool segment_match(std::string_view p, std::string_view t) {
  if (p.empty()) return t.empty();
  if (p[0] == '*') {
    for (std::size_t i = 0; i <= t.size(); ++i)
      if (segment_match(p.substr(1), t.substr(i))) return true;
    return false;
  }
  if (t.empty()) return false;
  return (p[0] == '?' || p[0] == t[0]) && segment_match(p.substr(1), t.substr(1));
}

bool match(const std::vector<std::string_view>& p, std::size_t i, const std::vector<std::string_view>& t, std::size_t j) {
  if (i == p.size()) return j == t.size();
  if (p[i] == "**") {
    for (std::size_t k = j; k <= t.size(); ++k)
      if (match(p, i + 1, t, k)) return true;
    return false;
  }
  return j < t.size() && segment_match(p[i], t[j]) && match(p, i + 1, t, j + 1);
}

}  // namespace

bool path_glob_match(const std::string& pattern, const std::string& relative_path) {
  return match(segments(pattern), 0, segments(relative_path), 0);
}

bool path_glob_any(const std::vector<std::string>& patterns, const std::string& relative_path) {
  for (const auto& p : patterns)
    if (path_glob_match(p, relative_path)) return true;
  return false;
}

}  // namespace mi::agents
