// tokenizer.json "decoder": turns token strings back into text. Supported: ByteLevel (each character of the
// byte-level alphabet back to its byte; a token with any other character - e.g. an added token written in plain
// Unicode - contributes its own UTF-8 bytes), ByteFallback (<0xNN> -> byte NN), Fuse (concatenation, which is
// what we do anyway), Sequence of these, and null (tokens joined with single spaces, as HF does without a decoder).
// The concatenated bytes become text with utf8_lossy (invalid sequences -> U+FFFD).
// Note: HF's ByteFallback replaces an invalid run of <0xNN> tokens by one U+FFFD per byte; we replace each maximal
// invalid subpart once (same result for valid UTF-8, which is all byte-level vocabularies ever produce).
#pragma once
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mi::tok {

class Decoder {
 public:
  static Decoder from_json(const nlohmann::json& config, std::string_view source);

  // Appends the bytes of one token (its string from the vocabulary or the added tokens) to `out`.
  void append_token_bytes(std::string_view token, std::string* out) const;
  // Bytes placed between consecutive tokens ("" normally, " " without a decoder).
  std::string_view separator() const { return separator_; }

 private:
  bool byte_level_ = false;
  bool byte_fallback_ = false;
  std::string separator_;
};

}  // namespace mi::tok
