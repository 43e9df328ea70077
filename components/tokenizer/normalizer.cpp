#include "tokenizer/normalizer.h"

#include <cstdlib>

#include <utf8proc.h>

#include "common/error.h"
#include "tokenizer/unicode_props.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

namespace {

void parse_into(const nlohmann::json& config, std::string_view source, std::vector<Normalizer::Step>* steps) {
  if (config.is_null()) return;
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    fail(source, ": field 'normalizer': expected null or an object with a string 'type'");
  }
  const std::string type = config["type"].get<std::string>();
  if (type == "NFC") steps->push_back(Normalizer::Step::kNFC);
  else if (type == "NFD") steps->push_back(Normalizer::Step::kNFD);
  else if (type == "NFKC") steps->push_back(Normalizer::Step::kNFKC);
  else if (type == "NFKD") steps->push_back(Normalizer::Step::kNFKD);
  else if (type == "Lowercase") steps->push_back(Normalizer::Step::kLowercase);
  else if (type == "Sequence") {
    if (!config.contains("normalizers") || !config["normalizers"].is_array()) {
      fail(source, ": normalizer Sequence: expected an array field 'normalizers'");
    }
    for (const auto& child : config["normalizers"]) parse_into(child, source, steps);
  } else {
    fail(source, ": normalizer type '", type,
         "' is not supported (supported: null, NFC, NFD, NFKC, NFKD, Lowercase, Sequence)");
  }
}

std::string utf8proc_transform(std::string_view text, int options) {
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()), static_cast<utf8proc_ssize_t>(text.size()),
                   &out, static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n < 0) fail("tokenizer normalizer: ", utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), static_cast<size_t>(n));
  std::free(out);
  return result;
}

bool is_ascii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

Normalizer Normalizer::from_json(const nlohmann::json& config, std::string_view source) {
  Normalizer n;
  parse_into(config, source, &n.steps_);
  return n;
}

std::string Normalizer::apply(std::string_view text) const {
  std::string current(text);
  for (const Step step : steps_) {
    switch (step) {
      case Step::kNFC:
      case Step::kNFD:
        if (is_ascii(current)) break;  // ASCII is invariant under canonical (de)composition
        current = utf8proc_transform(current, step == Step::kNFC ? UTF8PROC_COMPOSE : UTF8PROC_DECOMPOSE);
        break;
      case Step::kNFKC:
      case Step::kNFKD:
        current = utf8proc_transform(current, UTF8PROC_COMPAT | (step == Step::kNFKC ? UTF8PROC_COMPOSE
                                                                                      : UTF8PROC_DECOMPOSE));
        break;
      case Step::kLowercase: {
        const std::u32string cps = decode_utf8_strict(current, "tokenizer normalizer input");
        std::string lowered;
        lowered.reserve(current.size());
        for (const char32_t cp : cps) append_utf8(lowered, to_lower(cp));
        current = std::move(lowered);
        break;
      }
    }
  }
  return current;
}

}  // namespace mi::tok
