#include "tokenizer/decoder.h"

#include "common/error.h"
#include "tokenizer/byte_level_alphabet.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

namespace {

void parse_into(const nlohmann::json& config, std::string_view source, bool* byte_level, bool* byte_fallback) {
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    fail(source, ": field 'decoder': expected null or an object with a string 'type'");
  }
  const std::string type = config["type"].get<std::string>();
  if (type == "ByteLevel") *byte_level = true;
  else if (type == "ByteFallback") *byte_fallback = true;
  else if (type == "Fuse") {
    // Fuse joins all tokens into one string: concatenation is already how we decode.
  } else if (type == "Sequence") {
    if (!config.contains("decoders") || !config["decoders"].is_array()) {
      fail(source, ": decoder Sequence: expected an array field 'decoders'");
    }
    for (const auto& child : config["decoders"]) parse_into(child, source, byte_level, byte_fallback);
  } else {
    fail(source, ": decoder type '", type, "' is not supported (supported: null, ByteLevel, ByteFallback, Fuse, Sequence)");
  }
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

Decoder Decoder::from_json(const nlohmann::json& config, std::string_view source) {
  Decoder d;
  if (config.is_null()) {
    d.separator_ = " ";
    return d;
  }
  parse_into(config, source, &d.byte_level_, &d.byte_fallback_);
  return d;
}

void Decoder::append_token_bytes(std::string_view token, std::string* out) const {
  if (byte_fallback_ && token.size() == 6 && token.substr(0, 3) == "<0x" && token[5] == '>') {
    const int hi = hex_digit(token[3]), lo = hex_digit(token[4]);
    if (hi >= 0 && lo >= 0) {
      out->push_back(static_cast<char>(hi * 16 + lo));
      return;
    }
  }
  if (byte_level_) {
    const ByteLevelAlphabet& alphabet = ByteLevelAlphabet::instance();
    const size_t start = out->size();
    size_t pos = 0;
    while (pos < token.size()) {
      char32_t cp = 0;
      const size_t len = decode_utf8_at(token, pos, &cp);
      const int byte = len ? alphabet.byte_for_char(cp) : -1;
      if (byte < 0) {  // not a byte-level token: its own UTF-8 text
        out->resize(start);
        out->append(token);
        return;
      }
      out->push_back(static_cast<char>(byte));
      pos += len;
    }
    return;
  }
  out->append(token);
}

}  // namespace mi::tok
