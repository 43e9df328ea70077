// tokenizer.json "model" of type "BPE" (Sennrich et al. 2016, byte-level as in GPT-2): a vocabulary
// (token string -> id) and a ranked list of merges. A pre-token starts as one symbol per character; the adjacent
// pair with the best (lowest) merge rank is merged, leftmost first among equal ranks, until no pair has a merge.
// Options honoured: ignore_merges (a pre-token that is itself in the vocabulary becomes that token directly),
// byte_fallback (an unknown character becomes its UTF-8 bytes as <0xNN> tokens), unk_token / fuse_unk.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::tok {

// Hash that lets unordered_map<std::string, ...> be searched with a std::string_view without allocating.
struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, int32_t, StringViewHash, std::equal_to<>>;

class BpeModel {
 public:
  // `config` is the tokenizer.json "model" object; `source` names the file for errors.
  static BpeModel from_json(const nlohmann::json& config, std::string_view source);

  BpeModel() = default;
  BpeModel(BpeModel&& other) noexcept;
  BpeModel& operator=(BpeModel&& other) noexcept;

  // Encodes one pre-token (text in the model's alphabet) and appends its ids to `out`. Thread-safe.
  void encode(std::string_view word, std::vector<int32_t>* out) const;

  std::optional<int32_t> token_to_id(std::string_view token) const;
  // The token string of `id`, or nullptr if the vocabulary has no such id.
  const std::string* id_to_token(int32_t id) const;
  // One past the largest id in the vocabulary.
  size_t id_limit() const { return id_to_token_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    int32_t merged_id;
  };
  static uint64_t pair_key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  }
  // Appends the initial symbols of `word` (one per character, or byte-fallback / unk replacements).
  void initial_symbols(std::string_view word, std::vector<int32_t>* ids) const;
  void merge_symbols(std::vector<int32_t>* ids) const;

  TokenIdMap vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_present_;
  std::unordered_map<uint64_t, Merge> merges_;
  bool ignore_merges_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  std::optional<int32_t> unk_id_;
  std::vector<int32_t> byte_token_ids_;  // <0xNN> ids for byte_fallback (-1 where missing)

  // Cache of encoded pre-tokens: natural text repeats the same words a lot.
  static constexpr size_t kCacheMaxEntries = 200000;
  static constexpr size_t kCacheMaxWordBytes = 256;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>, StringViewHash, std::equal_to<>> cache_;
};

}  // namespace mi::tok
