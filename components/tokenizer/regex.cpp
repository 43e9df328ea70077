#include "tokenizer/regex.h"

#include <limits>

#include "common/error.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

namespace {

constexpr size_t kUnbounded = std::numeric_limits<size_t>::max();

// One member of a character class.
struct ClassItem {
  enum Kind { kRange, kCategory, kSpace, kDigit, kWord } kind = kRange;
  char32_t lo = 0, hi = 0;   // kRange
  CategoryMask mask = 0;     // kCategory
  bool negated = false;      // \P{..}, \S, \D, \W

  bool contains(char32_t cp) const {
    bool in = false;
    switch (kind) {
      case kRange: in = cp >= lo && cp <= hi; break;
      case kCategory: in = (category_bit(cp) & mask) != 0; break;
      // Oniguruma's Unicode semantics (the Rust tokenizers' engine): \s = White_Space, \d = Nd, \w = word
      // characters (approximated as letters, marks, Nd, Nl and Pc; Oniguruma uses the Alphabetic property).
      case kSpace: in = is_white_space(cp); break;
      case kDigit: in = (category_bit(cp) & kDecimalNumberMask) != 0; break;
      case kWord:
        in = (category_bit(cp) & (kLetterMask | kMarkMask | kDecimalNumberMask | kConnectorPunctuationMask |
                                  (1u << 10))) != 0;
        break;
    }
    return in != negated;
  }
};

// A set of code points: a literal, ".", an escape like \s, or a bracketed class.
struct CharClass {
  std::vector<ClassItem> items;
  bool negated = false;
  bool case_insensitive = false;

  bool contains_exact(char32_t cp) const {
    for (const ClassItem& item : items) {
      if (item.contains(cp)) return true;
    }
    return false;
  }
  bool contains(char32_t cp) const {
    bool in = contains_exact(cp);
    // Case-insensitive: the simple case mappings of cp count too (so 'S' matches 's', and U+017F 'ſ' matches 's'
    // through its uppercase 'S').
    if (!in && case_insensitive) in = contains_exact(to_lower(cp)) || contains_exact(to_upper(cp));
    return in != negated;
  }
};

}  // namespace

struct RegexNode {
  enum Kind { kChar, kSequence, kAlternation, kRepeat, kLookahead, kStartAnchor, kEndAnchor } kind = kSequence;
  CharClass char_class;                             // kChar
  std::vector<std::unique_ptr<RegexNode>> children;  // kSequence, kAlternation; kRepeat/kLookahead: children[0]
  size_t min = 0, max = 0;                           // kRepeat
  bool greedy = true, possessive = false;            // kRepeat
  bool negative = false;                             // kLookahead
};

namespace {

class Parser {
 public:
  explicit Parser(std::string_view pattern)
      : pattern_text_(pattern), p_(decode_utf8_strict(pattern, "tokenizer regex pattern")) {}

  std::unique_ptr<RegexNode> parse() {
    auto root = parse_alternation(false);
    if (pos_ != p_.size()) error("unbalanced ')'");
    return root;
  }

 private:
  [[noreturn]] void error(std::string_view what) const {
    fail("tokenizer regex \"", pattern_text_, "\": ", what, " at character ", pos_,
         " (supported: the subset documented in components/tokenizer/regex.h)");
  }
  bool at_end() const { return pos_ >= p_.size(); }
  char32_t peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead] : 0; }
  bool lookahead_is(std::u32string_view s) const { return p_.compare(pos_, s.size(), s) == 0; }

  std::unique_ptr<RegexNode> parse_alternation(bool case_insensitive) {
    auto alt = std::make_unique<RegexNode>();
    alt->kind = RegexNode::kAlternation;
    alt->children.push_back(parse_sequence(case_insensitive));
    while (!at_end() && peek() == '|') {
      ++pos_;
      alt->children.push_back(parse_sequence(case_insensitive));
    }
    if (alt->children.size() == 1) return std::move(alt->children[0]);
    return alt;
  }

  std::unique_ptr<RegexNode> parse_sequence(bool case_insensitive) {
    auto seq = std::make_unique<RegexNode>();
    seq->kind = RegexNode::kSequence;
    while (!at_end() && peek() != '|' && peek() != ')') {
      auto atom = parse_atom(case_insensitive);
      seq->children.push_back(parse_quantifier(std::move(atom)));
    }
    if (seq->children.size() == 1) return std::move(seq->children[0]);
    return seq;
  }

  bool parse_number(size_t* value) {
    if (at_end() || peek() < '0' || peek() > '9') return false;
    size_t v = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 100000) error("repetition count too large");
      ++pos_;
    }
    *value = v;
    return true;
  }

  std::unique_ptr<RegexNode> parse_quantifier(std::unique_ptr<RegexNode> atom) {
    if (at_end()) return atom;
    size_t min = 0, max = 0;
    const char32_t c = peek();
    if (c == '?') { min = 0; max = 1; ++pos_; }
    else if (c == '*') { min = 0; max = kUnbounded; ++pos_; }
    else if (c == '+') { min = 1; max = kUnbounded; ++pos_; }
    else if (c == '{') {
      const size_t save = pos_;
      ++pos_;
      if (!parse_number(&min)) { pos_ = save; return atom; }  // a literal '{' (as in ECMAScript Annex B / Onig)
      max = min;
      if (!at_end() && peek() == ',') {
        ++pos_;
        if (!parse_number(&max)) max = kUnbounded;
      }
      if (at_end() || peek() != '}') error("malformed {m,n} quantifier");
      ++pos_;
      if (max < min) error("quantifier {m,n} with n < m");
    } else {
      return atom;
    }
    if (atom->kind == RegexNode::kStartAnchor || atom->kind == RegexNode::kEndAnchor ||
        atom->kind == RegexNode::kLookahead) {
      error("quantifier on an assertion");
    }
    auto rep = std::make_unique<RegexNode>();
    rep->kind = RegexNode::kRepeat;
    rep->min = min;
    rep->max = max;
    if (!at_end() && peek() == '?') { rep->greedy = false; ++pos_; }
    else if (!at_end() && peek() == '+') {
      if (atom->kind != RegexNode::kChar) error("possessive quantifier on a group (only single characters)");
      rep->possessive = true;
      ++pos_;
    }
    if (!at_end() && (peek() == '?' || peek() == '*' || peek() == '+' || peek() == '{')) {
      error("stacked quantifiers");
    }
    rep->children.push_back(std::move(atom));
    return rep;
  }

  std::unique_ptr<RegexNode> make_char(CharClass cls) {
    auto node = std::make_unique<RegexNode>();
    node->kind = RegexNode::kChar;
    node->char_class = std::move(cls);
    return node;
  }

  static CharClass single(char32_t c, bool case_insensitive) {
    CharClass cls;
    cls.items.push_back({ClassItem::kRange, c, c});
    cls.case_insensitive = case_insensitive;
    return cls;
  }

  std::unique_ptr<RegexNode> parse_atom(bool case_insensitive) {
    const char32_t c = peek();
    switch (c) {
      case '(': return parse_group(case_insensitive);
      case '[': return make_char(parse_class(case_insensitive));
      case '.': {
        ++pos_;
        // Oniguruma ".": anything but a newline.
        CharClass cls;
        cls.negated = true;
        cls.items.push_back({ClassItem::kRange, U'\n', U'\n'});
        return make_char(std::move(cls));
      }
      case '^': { ++pos_; auto n = std::make_unique<RegexNode>(); n->kind = RegexNode::kStartAnchor; return n; }
      case '$': { ++pos_; auto n = std::make_unique<RegexNode>(); n->kind = RegexNode::kEndAnchor; return n; }
      case '*': case '+': case '?': error("quantifier without an operand");
      case '\\': {
        ++pos_;
        CharClass cls;
        cls.case_insensitive = case_insensitive;
        ClassItem item;
        if (parse_escape(&item, /*in_class=*/false)) {
          cls.items.push_back(item);
          return make_char(std::move(cls));
        }
        return make_char(single(item.lo, case_insensitive));
      }
      default:
        ++pos_;
        return make_char(single(c, case_insensitive));
    }
  }

  std::unique_ptr<RegexNode> parse_group(bool case_insensitive) {
    ++pos_;  // '('
    std::unique_ptr<RegexNode> node;
    if (peek() == '?') {
      if (lookahead_is(U"?:")) {
        pos_ += 2;
        node = parse_alternation(case_insensitive);
      } else if (lookahead_is(U"?i:")) {
        pos_ += 3;
        node = parse_alternation(true);
      } else if (lookahead_is(U"?=") || lookahead_is(U"?!")) {
        const bool negative = peek(1) == '!';
        pos_ += 2;
        node = std::make_unique<RegexNode>();
        node->kind = RegexNode::kLookahead;
        node->negative = negative;
        node->children.push_back(parse_alternation(case_insensitive));
      } else if (lookahead_is(U"?<=") || lookahead_is(U"?<!")) {
        error("lookbehind is not supported");
      } else if (lookahead_is(U"?>")) {
        error("atomic groups are not supported");
      } else {
        error("unsupported group syntax");
      }
    } else {
      node = parse_alternation(case_insensitive);  // capturing group: captures are not needed for splitting
    }
    if (at_end() || peek() != ')') error("missing ')'");
    ++pos_;
    return node;
  }

  uint32_t parse_hex(size_t digits) {
    uint32_t v = 0;
    for (size_t i = 0; i < digits; ++i) {
      const char32_t h = peek();
      int d = -1;
      if (h >= '0' && h <= '9') d = static_cast<int>(h - '0');
      else if (h >= 'a' && h <= 'f') d = static_cast<int>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') d = static_cast<int>(h - 'A' + 10);
      if (d < 0) error("malformed hex escape");
      v = v * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return v;
  }

  // Parses the escape after a backslash. Returns true if it is a class escape (\p, \s, ...) stored in `item`;
  // false if it is a single character, stored in item->lo.
  bool parse_escape(ClassItem* item, bool in_class) {
    if (at_end()) error("pattern ends with a backslash");
    const char32_t c = peek();
    ++pos_;
    switch (c) {
      case 'p': case 'P': {
        if (peek() != '{') error("\\p without {name}");
        ++pos_;
        std::string name;
        while (!at_end() && peek() != '}') {
          if (peek() > 0x7F) error("non-ASCII property name");
          name.push_back(static_cast<char>(peek()));
          ++pos_;
        }
        if (at_end()) error("unterminated \\p{...}");
        ++pos_;
        const CategoryMask mask = category_mask_for_name(name);
        if (mask == 0) error("unsupported Unicode property \\p{" + name + "} (only General Categories)");
        *item = ClassItem{ClassItem::kCategory, 0, 0, mask, c == 'P'};
        return true;
      }
      case 's': case 'S': *item = ClassItem{ClassItem::kSpace, 0, 0, 0, c == 'S'}; return true;
      case 'd': case 'D': *item = ClassItem{ClassItem::kDigit, 0, 0, 0, c == 'D'}; return true;
      case 'w': case 'W': *item = ClassItem{ClassItem::kWord, 0, 0, 0, c == 'W'}; return true;
      case 'r': item->lo = '\r'; return false;
      case 'n': item->lo = '\n'; return false;
      case 't': item->lo = '\t'; return false;
      case 'f': item->lo = '\f'; return false;
      case 'v': item->lo = '\v'; return false;
      case '0': item->lo = 0; return false;
      case 'x':
        if (peek() == '{') {
          ++pos_;
          uint32_t v = 0;
          size_t n = 0;
          while (!at_end() && peek() != '}') { v = v * 16 + parse_hex(1); if (++n > 6) error("malformed \\x{...}"); }
          if (at_end() || n == 0) error("malformed \\x{...}");
          ++pos_;
          item->lo = v;
        } else {
          item->lo = parse_hex(2);
        }
        return false;
      case 'u': item->lo = parse_hex(4); return false;
      default:
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
          error(std::string("unsupported escape \\") + static_cast<char>(c) + (in_class ? " in a class" : ""));
        }
        item->lo = c;  // escaped punctuation or symbol stands for itself
        return false;
    }
  }

  CharClass parse_class(bool case_insensitive) {
    ++pos_;  // '['
    CharClass cls;
    cls.case_insensitive = case_insensitive;
    if (peek() == '^') { cls.negated = true; ++pos_; }
    bool first = true;
    while (true) {
      if (at_end()) error("unterminated character class");
      char32_t c = peek();
      if (c == ']' && !first) { ++pos_; break; }
      first = false;
      if (c == '[') error("nested character classes are not supported");
      ++pos_;
      ClassItem item;
      if (c == '\\') {
        if (parse_escape(&item, true)) { cls.items.push_back(item); continue; }
        c = item.lo;
      }
      char32_t hi = c;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        hi = peek();
        ++pos_;
        if (hi == '\\') {
          ClassItem end_item;
          if (parse_escape(&end_item, true)) error("class escape as a range end");
          hi = end_item.lo;
        }
        if (hi < c) error("character range out of order");
      }
      cls.items.push_back({ClassItem::kRange, c, hi});
    }
    return cls;
  }

  std::string_view pattern_text_;
  std::u32string p_;
  size_t pos_ = 0;
};

// Backtracking matcher in continuation-passing style: each node, once matched, calls the continuation `k` (what
// follows it in the pattern), so alternatives and quantifiers can retry when the rest fails.
class Matcher {
 public:
  Matcher(std::u32string_view text, std::string_view pattern) : text_(text), pattern_(pattern) {}

  // Matches `root` anchored at `pos`; on success the end position is in end().
  bool match_at(const RegexNode* root, size_t pos) {
    const Frame accept{Frame::kAcceptTop, nullptr, 0, 0, nullptr};
    steps_ = 0;
    return match(root, pos, &accept);
  }
  size_t end() const { return end_; }

 private:
  struct Frame {
    enum Kind { kSeqNext, kRepeatNext, kAcceptTop, kAcceptLookahead } kind;
    const RegexNode* node;
    size_t index;      // kSeqNext: next child; kRepeatNext: iterations done
    size_t start_pos;  // kRepeatNext: where this iteration started
    const Frame* parent;
  };

  // Bounds on the work for one input: a pathological pattern must not hang or blow the stack (a few hundred bytes
  // of stack per level, so this stays within ~2 MB even on small thread stacks).
  static constexpr size_t kMaxDepth = 5000;
  static constexpr size_t kMaxSteps = 50'000'000;

  struct DepthGuard {
    explicit DepthGuard(Matcher& m) : m(m) {
      if (++m.depth_ > kMaxDepth) fail("tokenizer regex \"", m.pattern_, "\": backtracking too deep for this input");
      if (++m.steps_ > kMaxSteps) fail("tokenizer regex \"", m.pattern_, "\": too much backtracking for this input");
    }
    ~DepthGuard() { --m.depth_; }
    Matcher& m;
  };

  bool match(const RegexNode* n, size_t pos, const Frame* k) {
    DepthGuard guard(*this);
    switch (n->kind) {
      case RegexNode::kChar:
        return pos < text_.size() && n->char_class.contains(text_[pos]) && resume(k, pos + 1);
      case RegexNode::kSequence: {
        if (n->children.empty()) return resume(k, pos);
        const Frame next{Frame::kSeqNext, n, 1, 0, k};
        return match(n->children[0].get(), pos, &next);
      }
      case RegexNode::kAlternation:
        for (const auto& child : n->children) {
          if (match(child.get(), pos, k)) return true;
        }
        return false;
      case RegexNode::kRepeat: {
        const size_t width = fixed_width(n->children[0].get());
        if (width > 0) return repeat_fixed_width(n, width, pos, k);
        return repeat_step(n, 0, pos, k);
      }
      case RegexNode::kLookahead: {
        const Frame accept{Frame::kAcceptLookahead, nullptr, 0, 0, nullptr};
        const bool matched = match(n->children[0].get(), pos, &accept);
        return matched != n->negative && resume(k, pos);
      }
      case RegexNode::kStartAnchor:
        return pos == 0 && resume(k, pos);
      case RegexNode::kEndAnchor:
        return pos == text_.size() && resume(k, pos);
    }
    return false;
  }

  // Width in code points of a node that always consumes the same number of characters and never backtracks
  // internally: a character, a fixed count of one (\p{N}{3}), or a sequence of those; 0 otherwise.
  static size_t fixed_width(const RegexNode* n) {
    switch (n->kind) {
      case RegexNode::kChar:
        return 1;
      case RegexNode::kRepeat:
        return n->min == n->max && n->children[0]->kind == RegexNode::kChar ? n->min : 0;
      case RegexNode::kSequence: {
        size_t width = 0;
        for (const auto& child : n->children) {
          const size_t w = fixed_width(child.get());
          if (w == 0) return 0;
          width += w;
        }
        return width;
      }
      default:
        return 0;
    }
  }

  // Whether a fixed-width node matches at `pos` (the caller checked pos + width <= size).
  bool matches_fixed(const RegexNode* n, size_t pos) const {
    switch (n->kind) {
      case RegexNode::kChar:
        return n->char_class.contains(text_[pos]);
      case RegexNode::kRepeat:
        for (size_t i = 0; i < n->min; ++i) {
          if (!n->children[0]->char_class.contains(text_[pos + i])) return false;
        }
        return true;
      default:  // kSequence
        for (const auto& child : n->children) {
          if (!matches_fixed(child.get(), pos)) return false;
          pos += fixed_width(child.get());
        }
        return true;
    }
  }

  // x*, x+, x{m,n} where every x consumes the same fixed number of characters (a character, \p{Nd}{3}, ab):
  // count the iterations once, then try the continuation after each count (most first when greedy), without a
  // recursion level per iteration - a long run of letters must not grow the stack.
  bool repeat_fixed_width(const RegexNode* n, size_t width, size_t pos, const Frame* k) {
    const RegexNode* child = n->children[0].get();
    size_t count = 0;
    while (count < n->max && pos + (count + 1) * width <= text_.size() && matches_fixed(child, pos + count * width)) {
      ++count;
    }
    if (count < n->min) return false;
    if (n->possessive) return resume(k, pos + count * width);
    if (n->greedy) {
      for (size_t c = count + 1; c-- > n->min;) {
        if (resume(k, pos + c * width)) return true;
      }
    } else {
      for (size_t c = n->min; c <= count; ++c) {
        if (resume(k, pos + c * width)) return true;
      }
    }
    return false;
  }

  bool repeat_step(const RegexNode* n, size_t done, size_t pos, const Frame* k) {
    const Frame next{Frame::kRepeatNext, n, done + 1, pos, k};
    if (n->greedy) {
      if (done < n->max && match(n->children[0].get(), pos, &next)) return true;
      return done >= n->min && resume(k, pos);
    }
    if (done >= n->min && resume(k, pos)) return true;
    return done < n->max && match(n->children[0].get(), pos, &next);
  }

  bool resume(const Frame* k, size_t pos) {
    switch (k->kind) {
      case Frame::kSeqNext: {
        const RegexNode* seq = k->node;
        if (k->index < seq->children.size()) {
          const Frame next{Frame::kSeqNext, seq, k->index + 1, 0, k->parent};
          return match(seq->children[k->index].get(), pos, &next);
        }
        return resume(k->parent, pos);
      }
      case Frame::kRepeatNext:
        // An iteration that consumed nothing cannot make progress; stop once the minimum is met.
        if (pos == k->start_pos && k->index > k->node->min) return false;
        return repeat_step(k->node, k->index, pos, k->parent);
      case Frame::kAcceptTop:
        end_ = pos;
        return true;
      case Frame::kAcceptLookahead:
        return true;
    }
    return false;
  }

  std::u32string_view text_;
  std::string_view pattern_;
  size_t end_ = 0;
  size_t depth_ = 0;
  size_t steps_ = 0;
};

}  // namespace

Regex::Regex(std::string_view pattern) : pattern_(pattern), root_(Parser(pattern).parse()) {}
Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;
Regex& Regex::operator=(Regex&&) noexcept = default;

bool Regex::find(std::u32string_view text, size_t from, size_t* begin, size_t* end) const {
  Matcher matcher(text, pattern_);
  for (size_t start = from; start <= text.size(); ++start) {
    if (matcher.match_at(root_.get(), start)) {
      *begin = start;
      *end = matcher.end();
      return true;
    }
  }
  return false;
}

std::vector<std::pair<size_t, size_t>> Regex::find_all(std::u32string_view text) const {
  std::vector<std::pair<size_t, size_t>> matches;
  Matcher matcher(text, pattern_);
  size_t start = 0;
  while (start < text.size()) {
    if (matcher.match_at(root_.get(), start) && matcher.end() > start) {
      matches.emplace_back(start, matcher.end());
      start = matcher.end();
    } else {
      ++start;  // no match here, or an empty one (which splitting ignores)
    }
  }
  return matches;
}

}  // namespace mi::tok
