#include "tokenizer/added_vocabulary.h"

#include <algorithm>

#include "common/error.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

namespace {

bool bool_field(const nlohmann::json& entry, const char* field, bool fallback, size_t index, std::string_view source) {
  if (!entry.contains(field) || entry[field].is_null()) return fallback;
  if (!entry[field].is_boolean()) fail(source, ": added_tokens[", index, "].", field, ": expected true or false");
  return entry[field].get<bool>();
}

bool is_word_char(char32_t cp) {
  return cp == '_' || (category_bit(cp) & (kLetterMask | kNumberMask)) != 0;
}

// The code point that ends just before byte `pos` of valid UTF-8 `text` (pos > 0).
char32_t code_point_before(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  char32_t cp = 0;
  return decode_utf8_at(text, start, &cp) ? cp : 0;
}

char32_t code_point_at(std::string_view text, size_t pos) {
  char32_t cp = 0;
  return decode_utf8_at(text, pos, &cp) ? cp : 0;
}

size_t code_point_length_before(std::string_view text, size_t pos) {
  size_t start = pos - 1;
  while (start > 0 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  return pos - start;
}

}  // namespace

AddedVocabulary AddedVocabulary::from_json(const nlohmann::json& config, const Normalizer& normalizer,
                                           std::string_view source) {
  AddedVocabulary v;
  v.raw_.name = "raw";
  v.normalized_.name = "normalized";
  if (config.is_null()) return v;
  if (!config.is_array()) fail(source, ": field 'added_tokens': expected an array");
  for (size_t i = 0; i < config.size(); ++i) {
    const auto& entry = config[i];
    if (!entry.is_object()) fail(source, ": added_tokens[", i, "]: expected an object");
    if (!entry.contains("id") || !entry["id"].is_number_integer() || entry["id"].get<int64_t>() < 0 ||
        entry["id"].get<int64_t>() > INT32_MAX) {
      fail(source, ": added_tokens[", i, "].id: expected a non-negative integer");
    }
    if (!entry.contains("content") || !entry["content"].is_string() || entry["content"].get<std::string>().empty()) {
      fail(source, ": added_tokens[", i, "].content: expected a non-empty string");
    }
    AddedToken t;
    t.id = static_cast<int32_t>(entry["id"].get<int64_t>());
    t.content = entry["content"].get<std::string>();
    decode_utf8_strict(t.content, std::string(source) + ": added_tokens[" + std::to_string(i) + "].content");
    t.special = bool_field(entry, "special", false, i, source);
    // HF's default: special tokens are matched on raw text, others on normalized text.
    t.normalized = bool_field(entry, "normalized", !t.special, i, source);
    t.lstrip = bool_field(entry, "lstrip", false, i, source);
    t.rstrip = bool_field(entry, "rstrip", false, i, source);
    t.single_word = bool_field(entry, "single_word", false, i, source);
    if (v.by_id_.count(t.id)) fail(source, ": added_tokens[", i, "].id ", t.id, " is used twice");
    v.by_id_[t.id] = v.tokens_.size();
    v.tokens_.push_back(std::move(t));
  }
  for (Pass* p : {&v.raw_, &v.normalized_}) p->match_strings.resize(v.tokens_.size());
  for (size_t i = 0; i < v.tokens_.size(); ++i) {
    const AddedToken& t = v.tokens_[i];
    Pass& p = t.normalized ? v.normalized_ : v.raw_;
    p.match_strings[i] = t.normalized ? normalizer.apply(t.content) : t.content;
    if (p.match_strings[i].empty()) continue;
    p.by_first_byte[static_cast<unsigned char>(p.match_strings[i][0])].push_back(i);
  }
  for (Pass* p : {&v.raw_, &v.normalized_}) {
    for (auto& [byte, list] : p->by_first_byte) {
      std::stable_sort(list.begin(), list.end(), [p](size_t a, size_t b) {
        return p->match_strings[a].size() > p->match_strings[b].size();
      });
    }
  }
  return v;
}

const AddedToken* AddedVocabulary::find_id(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocabulary::find_content(std::string_view content) const {
  for (const AddedToken& t : tokens_) {
    if (t.content == content) return t.id;
  }
  return std::nullopt;
}

std::vector<TextPiece> AddedVocabulary::split(std::string_view text, bool normalized_pass) const {
  const Pass& p = pass(normalized_pass);
  std::vector<TextPiece> pieces;
  if (p.by_first_byte.empty()) {
    if (!text.empty()) pieces.push_back({text, -1});
    return pieces;
  }
  size_t emitted = 0;  // text before this byte offset is already in `pieces`
  size_t pos = 0;
  while (pos < text.size()) {
    auto bucket = p.by_first_byte.find(static_cast<unsigned char>(text[pos]));
    const AddedToken* hit = nullptr;
    size_t hit_len = 0;
    if (bucket != p.by_first_byte.end()) {
      for (const size_t index : bucket->second) {  // longest first
        const std::string& s = p.match_strings[index];
        if (text.compare(pos, s.size(), s) != 0) continue;
        const AddedToken& t = tokens_[index];
        if (t.single_word) {
          const bool word_before = pos > 0 && is_word_char(code_point_before(text, pos));
          const bool word_after = pos + s.size() < text.size() && is_word_char(code_point_at(text, pos + s.size()));
          if (word_before || word_after) continue;
        }
        hit = &t;
        hit_len = s.size();
        break;
      }
    }
    if (!hit) {
      ++pos;
      continue;
    }
    size_t begin = pos, end = pos + hit_len;
    if (hit->lstrip) {
      while (begin > emitted && is_white_space(code_point_before(text, begin))) {
        begin -= code_point_length_before(text, begin);
      }
    }
    if (hit->rstrip) {
      char32_t cp = 0;
      size_t len = 0;
      while (end < text.size() && (len = decode_utf8_at(text, end, &cp)) > 0 && is_white_space(cp)) end += len;
    }
    if (begin > emitted) pieces.push_back({text.substr(emitted, begin - emitted), -1});
    pieces.push_back({text.substr(begin, end - begin), hit->id});
    emitted = pos = end;
  }
  if (emitted < text.size()) pieces.push_back({text.substr(emitted), -1});
  return pieces;
}

}  // namespace mi::tok
