#include "tokenizer/bpe_model.h"

#include <cstdio>
#include <queue>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

BpeModel::BpeModel(BpeModel&& other) noexcept { *this = std::move(other); }

BpeModel& BpeModel::operator=(BpeModel&& other) noexcept {
  if (this == &other) return *this;
  vocab_ = std::move(other.vocab_);
  id_to_token_ = std::move(other.id_to_token_);
  id_present_ = std::move(other.id_present_);
  merges_ = std::move(other.merges_);
  ignore_merges_ = other.ignore_merges_;
  byte_fallback_ = other.byte_fallback_;
  fuse_unk_ = other.fuse_unk_;
  unk_id_ = other.unk_id_;
  byte_token_ids_ = std::move(other.byte_token_ids_);
  std::lock_guard<std::mutex> lock(other.cache_mutex_);
  cache_ = std::move(other.cache_);
  return *this;
}

namespace {

bool optional_bool(const nlohmann::json& config, const char* field, std::string_view source) {
  if (!config.contains(field) || config[field].is_null()) return false;
  if (!config[field].is_boolean()) fail(source, ": model field '", field, "': expected true or false");
  return config[field].get<bool>();
}

// "continuing_subword_prefix" / "end_of_word_suffix" change how merges build tokens; byte-level vocabularies
// leave them empty, and we do not implement them.
void require_empty_affix(const nlohmann::json& config, const char* field, std::string_view source) {
  if (!config.contains(field) || config[field].is_null()) return;
  if (!config[field].is_string() || !config[field].get<std::string>().empty()) {
    fail(source, ": model field '", field, "' is set; BPE with subword prefixes/suffixes is not supported");
  }
}

}  // namespace

BpeModel BpeModel::from_json(const nlohmann::json& config, std::string_view source) {
  BpeModel model;
  if (!config.is_object()) fail(source, ": field 'model': expected an object");
  if (config.contains("dropout") && !config["dropout"].is_null()) {
    fail(source, ": model field 'dropout' is set; BPE dropout (a training-time option) is not supported");
  }
  require_empty_affix(config, "continuing_subword_prefix", source);
  require_empty_affix(config, "end_of_word_suffix", source);
  model.ignore_merges_ = optional_bool(config, "ignore_merges", source);
  model.byte_fallback_ = optional_bool(config, "byte_fallback", source);
  model.fuse_unk_ = optional_bool(config, "fuse_unk", source);

  // vocab: {"token": id, ...}
  if (!config.contains("vocab") || !config["vocab"].is_object()) {
    fail(source, ": model field 'vocab': expected an object mapping token strings to ids");
  }
  const auto& vocab = config["vocab"];
  model.vocab_.reserve(vocab.size());
  int64_t max_id = -1;
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 || it.value().get<int64_t>() > INT32_MAX) {
      fail(source, ": model.vocab entry \"", it.key(), "\": expected a non-negative integer id");
    }
    const int64_t id = it.value().get<int64_t>();
    model.vocab_.emplace(it.key(), static_cast<int32_t>(id));
    if (id > max_id) max_id = id;
  }
  if (max_id + 1 > static_cast<int64_t>(vocab.size()) * 4 + 1024) {
    fail(source, ": model.vocab: ids are too sparse (largest id ", max_id, " for ", vocab.size(), " entries)");
  }
  model.id_to_token_.resize(static_cast<size_t>(max_id + 1));
  model.id_present_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [token, id] : model.vocab_) {
    if (model.id_present_[id]) fail(source, ": model.vocab: id ", id, " is used by two tokens");
    model.id_to_token_[id] = token;
    model.id_present_[id] = true;
  }

  // merges: ["a b", ...] (older files) or [["a", "b"], ...] (newer files); the index is the rank.
  if (!config.contains("merges") || !config["merges"].is_array()) {
    fail(source, ": model field 'merges': expected an array");
  }
  const auto& merges = config["merges"];
  model.merges_.reserve(merges.size());
  auto lookup = [&](std::string_view token, size_t rank) {
    auto it = model.vocab_.find(token);
    if (it == model.vocab_.end()) {
      fail(source, ": model.merges[", rank, "]: token \"", token, "\" is not in the vocabulary");
    }
    return it->second;
  };
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& m = merges[rank];
    std::string left, right;
    if (m.is_string()) {
      const std::string& s = m.get_ref<const std::string&>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
        fail(source, ": model.merges[", rank, "]: expected \"left right\" (one space), got \"", s, "\"");
      }
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      fail(source, ": model.merges[", rank, "]: expected \"left right\" or [\"left\", \"right\"]");
    }
    const int32_t left_id = lookup(left, rank);
    const int32_t right_id = lookup(right, rank);
    const int32_t merged_id = lookup(left + right, rank);
    // A pair listed twice keeps its first (best) rank.
    model.merges_.emplace(pair_key(left_id, right_id), Merge{static_cast<uint32_t>(rank), merged_id});
  }

  if (config.contains("unk_token") && !config["unk_token"].is_null()) {
    if (!config["unk_token"].is_string()) fail(source, ": model field 'unk_token': expected a string or null");
    auto it = model.vocab_.find(config["unk_token"].get<std::string>());
    if (it == model.vocab_.end()) {
      fail(source, ": model field 'unk_token': \"", config["unk_token"].get<std::string>(), "\" is not in the vocabulary");
    }
    model.unk_id_ = it->second;
  }
  model.byte_token_ids_.assign(256, -1);
  if (model.byte_fallback_) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      if (auto it = model.vocab_.find(std::string_view(name)); it != model.vocab_.end()) {
        model.byte_token_ids_[b] = it->second;
      }
    }
  }
  return model;
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_present_[id]) return nullptr;
  return &id_to_token_[id];
}

void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>* ids) const {
  bool previous_was_unk = false;
  size_t pos = 0;
  while (pos < word.size()) {
    char32_t cp = 0;
    size_t len = decode_utf8_at(word, pos, &cp);
    if (len == 0) len = 1;  // cannot happen for text that passed input validation; stay in bounds anyway
    const std::string_view ch = word.substr(pos, len);
    pos += len;
    if (auto it = vocab_.find(ch); it != vocab_.end()) {
      ids->push_back(it->second);
      previous_was_unk = false;
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes_known = true;
      for (const char b : ch) all_bytes_known = all_bytes_known && byte_token_ids_[static_cast<uint8_t>(b)] >= 0;
      if (all_bytes_known) {
        for (const char b : ch) ids->push_back(byte_token_ids_[static_cast<uint8_t>(b)]);
        previous_was_unk = false;
        continue;
      }
    }
    if (unk_id_) {
      if (!(fuse_unk_ && previous_was_unk)) ids->push_back(*unk_id_);
      previous_was_unk = true;
    }
    // With neither byte fallback nor an unk token, an unknown character produces no token (as in HF tokenizers).
  }
}

void BpeModel::merge_symbols(std::vector<int32_t>* ids) const {
  const size_t n = ids->size();
  if (n < 2) return;
  // Symbols form a doubly linked list over `ids`; merging folds the right symbol into the left one.
  std::vector<int32_t>& id = *ids;
  std::vector<int32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<int32_t>(i) - 1;
    next[i] = i + 1 < n ? static_cast<int32_t>(i + 1) : -1;
  }
  struct Candidate {
    uint32_t rank;
    int32_t pos;  // left symbol
    int32_t left_id, right_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto consider = [&](int32_t left) {
    if (left < 0 || next[left] < 0) return;
    auto it = merges_.find(pair_key(id[left], id[next[left]]));
    if (it != merges_.end()) queue.push({it->second.rank, left, id[left], id[next[left]]});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(static_cast<int32_t>(i));
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    // Skip candidates made stale by earlier merges.
    if (!alive[c.pos] || id[c.pos] != c.left_id) continue;
    const int32_t right = next[c.pos];
    if (right < 0 || id[right] != c.right_id) continue;
    id[c.pos] = merges_.at(pair_key(c.left_id, c.right_id)).merged_id;
    alive[right] = false;
    next[c.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = c.pos;
    consider(prev[c.pos]);
    consider(c.pos);
  }
  size_t out = 0;
  for (int32_t i = 0; i >= 0; i = next[i]) id[out++] = id[i];
  id.resize(out);
}

void BpeModel::encode(std::string_view word, std::vector<int32_t>* out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto it = vocab_.find(word); it != vocab_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheMaxWordBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(word.size());
  initial_symbols(word, &ids);
  merge_symbols(&ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();  // bounded memory; refills with the current text's words
    cache_.emplace(std::string(word), std::move(ids));
  }
}

}  // namespace mi::tok
