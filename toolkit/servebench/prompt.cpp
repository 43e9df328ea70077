#include "servebench/prompt.h"

#include <algorithm>
#include <array>
#include <cstdint>

namespace mi::servebench {
namespace {

// A small linear congruential generator: fixed, portable, enough to avoid one repeated word.
struct Lcg {
  std::uint64_t state;
  std::uint32_t next() {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return std::uint32_t(state >> 33);
  }
};

constexpr std::array<const char*, 16> kWords = {"the", "of", "and", "to", "in", "is", "that", "for",
                                                "it", "on", "with", "as", "was", "at", "by", "from"};

}  // namespace

std::string text_prompt(int words) {
  std::string out;
  Lcg rng{0x5eedu};
  for (int i = 0; i < words; ++i) {
    if (i > 0) out += ' ';
    out += kWords[rng.next() % kWords.size()];
  }
  return out;
}

std::vector<int> id_prompt(int n) {
  std::vector<int> ids;
  ids.reserve(std::size_t(std::max(n, 0)));
  Lcg rng{0x1d5u};
  for (int i = 0; i < n; ++i) ids.push_back(100 + int(rng.next() % 1000));
  return ids;
}

}  // namespace mi::servebench
