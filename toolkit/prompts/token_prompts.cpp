#include "prompts/token_prompts.h"

#include <algorithm>
#include <cstdint>

namespace mi::prompts {

std::vector<int> golden_prompt(int index, int length, int vocab) {
  std::vector<int> ids;
  ids.reserve(std::size_t(std::max(0, length)));
  uint64_t x = 12345 + uint64_t(index);
  for (int i = 0; i < length; ++i) {
    x = (1103515245 * x + 12345) % 2147483648ull;
    ids.push_back(int(1 + x % uint64_t(std::max(1, vocab - 1))));
  }
  return ids;
}

std::string ids_text(const std::vector<int>& ids) {
  std::string s;
  for (int id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

}  // namespace mi::prompts
