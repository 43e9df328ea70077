#include "agents/line_delta.h"

#include <string>
#include <unordered_map>

namespace mi::agents {
namespace {

std::unordered_map<std::string_view, long> count_lines(std::string_view text) {
  std::unordered_map<std::string_view, long> counts;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    ++counts[text.substr(start, end - start)];
    start = end + 1;
  }
  return counts;
}

}  // namespace

LineDelta line_delta(std::string_view before, std::string_view after) {
  const auto a = count_lines(before), b = count_lines(after);
  LineDelta d;
  for (const auto& [line, n] : b) {
    const auto it = a.find(line);
    d.added += std::max(0L, n - (it == a.end() ? 0 : it->second));
  }
  for (const auto& [line, n] : a) {
    const auto it = b.find(line);
    d.removed += std::max(0L, n - (it == b.end() ? 0 : it->second));
  }
  return d;
}

}  // namespace mi::agents
