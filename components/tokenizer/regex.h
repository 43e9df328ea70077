// A small backtracking regex engine for the patterns that tokenizer.json pre-tokenizers use (Split, ByteLevel
// use_regex). std::regex has no Unicode classes, so this implements exactly the subset those patterns need, with
// Perl/Oniguruma semantics (leftmost match, alternatives tried in order, greedy quantifiers backtrack):
//
//   alternation a|b, groups (...) (?:...) (?i:...), lookahead (?=...) (?!...), anchors ^ $,
//   quantifiers ? * + {m} {m,} {m,n} with lazy (?) and possessive (+, single-character operands only) forms,
//   classes [...] [^...] with ranges, \p{..} \P{..} (General Categories), \s \S \d \D \w \W, ".",
//   escapes \r \n \t \f \v \0 \xHH \x{H..} \uHHHH and escaped punctuation.
//
// Anything else (lookbehind, backreferences, atomic groups, scripts in \p{..}, nested classes) is rejected when the
// pattern is parsed, so an unsupported tokenizer fails loudly instead of tokenizing wrong.
// Matching runs on code points (a std::u32string_view), so positions are code point indices.
#pragma once
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mi::tok {

struct RegexNode;  // parsed pattern tree (regex.cpp)

class Regex {
 public:
  // Throws mi::Error naming the pattern and the unsupported or malformed construct.
  explicit Regex(std::string_view pattern);
  ~Regex();
  Regex(Regex&&) noexcept;
  Regex& operator=(Regex&&) noexcept;

  // The leftmost match starting at or after `from`, as [begin, end) code point indices; false if none.
  bool find(std::u32string_view text, size_t from, size_t* begin, size_t* end) const;

  // All non-overlapping, non-empty matches from left to right (the "find_iter" the Split pre-tokenizer uses).
  std::vector<std::pair<size_t, size_t>> find_all(std::u32string_view text) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  std::unique_ptr<RegexNode> root_;
};

}  // namespace mi::tok
