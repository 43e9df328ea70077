#include "tokenizer/pre_tokenizer.h"

#include <algorithm>
#include <utility>

#include "common/error.h"
#include "tokenizer/byte_level_alphabet.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

namespace {

// The GPT-2 split pattern that a ByteLevel pre-tokenizer applies when "use_regex" is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

const std::shared_ptr<const Regex>& gpt2_regex() {
  static const std::shared_ptr<const Regex> regex = std::make_shared<const Regex>(kGpt2Pattern);
  return regex;
}

bool get_bool(const nlohmann::json& config, const char* field, bool fallback, std::string_view source) {
  if (!config.contains(field) || config[field].is_null()) return fallback;
  if (!config[field].is_boolean()) fail(source, ": pre_tokenizer field '", field, "': expected true or false");
  return config[field].get<bool>();
}

PreTokenizer::SplitBehavior parse_behavior(const nlohmann::json& config, std::string_view source) {
  using B = PreTokenizer::SplitBehavior;
  if (!config.contains("behavior") || !config["behavior"].is_string()) {
    fail(source, ": pre_tokenizer Split: expected a string field 'behavior'");
  }
  const std::string b = config["behavior"].get<std::string>();
  if (b == "Removed") return B::kRemoved;
  if (b == "Isolated") return B::kIsolated;
  if (b == "MergedWithPrevious") return B::kMergedWithPrevious;
  if (b == "MergedWithNext") return B::kMergedWithNext;
  if (b == "Contiguous") return B::kContiguous;
  fail(source, ": pre_tokenizer Split: behavior '", b,
       "' is not one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
}

void parse_into(const nlohmann::json& config, std::string_view source, std::vector<PreTokenizer::Step>* steps) {
  if (config.is_null()) return;
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    fail(source, ": field 'pre_tokenizer': expected null or an object with a string 'type'");
  }
  const std::string type = config["type"].get<std::string>();
  PreTokenizer::Step step;
  if (type == "Sequence") {
    if (!config.contains("pretokenizers") || !config["pretokenizers"].is_array()) {
      fail(source, ": pre_tokenizer Sequence: expected an array field 'pretokenizers'");
    }
    for (const auto& child : config["pretokenizers"]) parse_into(child, source, steps);
    return;
  }
  if (type == "Split") {
    step.kind = PreTokenizer::Step::kSplit;
    const auto& pattern = config.contains("pattern") ? config["pattern"] : nlohmann::json();
    if (pattern.is_object() && pattern.contains("Regex") && pattern["Regex"].is_string()) {
      step.regex = std::make_shared<const Regex>(pattern["Regex"].get<std::string>());
    } else if (pattern.is_object() && pattern.contains("String") && pattern["String"].is_string()) {
      step.literal = pattern["String"].get<std::string>();
      if (step.literal.empty()) fail(source, ": pre_tokenizer Split: empty String pattern");
    } else {
      fail(source, ": pre_tokenizer Split: field 'pattern': expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
    }
    step.behavior = parse_behavior(config, source);
    step.invert = get_bool(config, "invert", false, source);
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizer::Step::kByteLevel;
    step.add_prefix_space = get_bool(config, "add_prefix_space", true, source);
    step.use_regex = get_bool(config, "use_regex", true, source);
    if (step.use_regex) step.regex = gpt2_regex();
  } else {
    fail(source, ": pre_tokenizer type '", type, "' is not supported (supported: null, Split, ByteLevel, Sequence)");
  }
  steps->push_back(std::move(step));
}

// A stretch of a piece: [begin, end) in bytes, and whether the split pattern matched it.
struct Segment {
  size_t begin, end;
  bool is_match;
};

// Cuts `text` into alternating matched / unmatched segments that cover it completely.
std::vector<Segment> find_segments(std::string_view text, const PreTokenizer::Step& step) {
  std::vector<Segment> segments;
  size_t cursor = 0;
  auto add_match = [&](size_t begin, size_t end) {
    if (begin > cursor) segments.push_back({cursor, begin, false});
    segments.push_back({begin, end, true});
    cursor = end;
  };
  if (step.regex) {
    std::vector<size_t> offsets;
    const std::u32string cps = decode_utf8_strict(text, "tokenizer pre_tokenizer input", &offsets);
    for (const auto& [b, e] : step.regex->find_all(cps)) add_match(offsets[b], offsets[e]);
  } else {
    for (size_t at = text.find(step.literal); at != std::string_view::npos;
         at = text.find(step.literal, at + step.literal.size())) {
      add_match(at, at + step.literal.size());
    }
  }
  if (cursor < text.size()) segments.push_back({cursor, text.size(), false});
  if (step.invert) {
    for (Segment& s : segments) s.is_match = !s.is_match;
  }
  return segments;
}

// Applies a Split behavior (what happens to the matched "delimiters") and returns the resulting pieces.
std::vector<std::pair<size_t, size_t>> apply_behavior(const std::vector<Segment>& segments,
                                                      PreTokenizer::SplitBehavior behavior) {
  using B = PreTokenizer::SplitBehavior;
  std::vector<std::pair<size_t, size_t>> pieces;
  switch (behavior) {
    case B::kRemoved:
      for (const Segment& s : segments) {
        if (!s.is_match) pieces.emplace_back(s.begin, s.end);
      }
      break;
    case B::kIsolated:
      for (const Segment& s : segments) pieces.emplace_back(s.begin, s.end);
      break;
    case B::kContiguous: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        if (s.is_match && previous_match) pieces.back().second = s.end;  // runs of delimiters become one piece
        else pieces.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    }
    case B::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Segment& s : segments) {
        // A delimiter joins the piece before it, unless that piece is itself a delimiter.
        if (s.is_match && !previous_match && !pieces.empty()) pieces.back().second = s.end;
        else pieces.emplace_back(s.begin, s.end);
        previous_match = s.is_match;
      }
      break;
    }
    case B::kMergedWithNext: {
      bool next_match = false;  // walking right to left
      for (size_t i = segments.size(); i-- > 0;) {
        const Segment& s = segments[i];
        if (s.is_match && !next_match && !pieces.empty()) pieces.back().first = s.begin;
        else pieces.emplace_back(s.begin, s.end);
        next_match = s.is_match;
      }
      std::reverse(pieces.begin(), pieces.end());
      break;
    }
  }
  return pieces;
}

}  // namespace

PreTokenizer PreTokenizer::from_json(const nlohmann::json& config, std::string_view source) {
  PreTokenizer p;
  parse_into(config, source, &p.steps_);
  return p;
}

bool PreTokenizer::is_byte_level() const {
  for (const Step& s : steps_) {
    if (s.kind == Step::kByteLevel) return true;
  }
  return false;
}

void PreTokenizer::apply(std::string_view text, std::vector<std::string>* out) const {
  std::vector<std::string> pieces;
  if (!text.empty()) pieces.emplace_back(text);
  std::vector<std::string> next;
  for (const Step& step : steps_) {
    next.clear();
    for (std::string& piece : pieces) {
      if (step.kind == Step::kByteLevel) {
        if (step.add_prefix_space && piece[0] != ' ') piece.insert(piece.begin(), ' ');
        std::vector<std::pair<size_t, size_t>> parts;
        if (step.use_regex) {
          parts = apply_behavior(find_segments(piece, step), SplitBehavior::kIsolated);
        } else {
          parts.emplace_back(0, piece.size());
        }
        const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::instance();
        for (const auto& [b, e] : parts) next.push_back(alphabet.encode(std::string_view(piece).substr(b, e - b)));
      } else {
        for (const auto& [b, e] : apply_behavior(find_segments(piece, step), step.behavior)) {
          next.push_back(piece.substr(b, e - b));
        }
      }
    }
    pieces.swap(next);
  }
  for (std::string& p : pieces) {
    if (!p.empty()) out->push_back(std::move(p));
  }
}

}  // namespace mi::tok
