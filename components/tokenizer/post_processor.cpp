#include "tokenizer/post_processor.h"

#include <string>

#include "common/error.h"

namespace mi::tok {

namespace {

int32_t special_token_id(const nlohmann::json& pair, const char* field, std::string_view source) {
  // Bert/Roberta store "cls": ["[CLS]", 101].
  if (!pair.is_array() || pair.size() != 2 || !pair[1].is_number_integer()) {
    fail(source, ": post_processor field '", field, "': expected [\"token\", id]");
  }
  return pair[1].get<int32_t>();
}

// Composes `inner` into `outer`: every sequence marker of `outer` is replaced by the whole `inner` template.
std::vector<int64_t> compose(const std::vector<int64_t>& outer, const std::vector<int64_t>& inner, int64_t marker) {
  if (outer.empty()) return inner;
  if (inner.empty()) return outer;
  std::vector<int64_t> out;
  for (const int64_t x : outer) {
    if (x == marker) out.insert(out.end(), inner.begin(), inner.end());
    else out.push_back(x);
  }
  return out;
}

std::vector<int64_t> parse_template(const nlohmann::json& config, std::string_view source, int64_t marker) {
  if (config.is_null()) return {};
  if (!config.is_object() || !config.contains("type") || !config["type"].is_string()) {
    fail(source, ": field 'post_processor': expected null or an object with a string 'type'");
  }
  const std::string type = config["type"].get<std::string>();
  if (type == "ByteLevel") return {};
  if (type == "Sequence") {
    if (!config.contains("processors") || !config["processors"].is_array()) {
      fail(source, ": post_processor Sequence: expected an array field 'processors'");
    }
    // Each processor wraps the output of the previous one.
    std::vector<int64_t> result;
    for (const auto& child : config["processors"]) result = compose(parse_template(child, source, marker), result, marker);
    return result;
  }
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    if (!config.contains("cls") || !config.contains("sep")) fail(source, ": post_processor ", type, ": needs 'cls' and 'sep'");
    return {special_token_id(config["cls"], "cls", source), marker, special_token_id(config["sep"], "sep", source)};
  }
  if (type == "TemplateProcessing") {
    if (!config.contains("single") || !config["single"].is_array()) {
      fail(source, ": post_processor TemplateProcessing: expected an array field 'single'");
    }
    const nlohmann::json specials =
        config.contains("special_tokens") && config["special_tokens"].is_object() ? config["special_tokens"]
                                                                                 : nlohmann::json::object();
    std::vector<int64_t> result;
    for (const auto& item : config["single"]) {
      if (item.is_object() && item.contains("Sequence")) {
        result.push_back(marker);
      } else if (item.is_object() && item.contains("SpecialToken") && item["SpecialToken"].contains("id") &&
                 item["SpecialToken"]["id"].is_string()) {
        const std::string name = item["SpecialToken"]["id"].get<std::string>();
        if (!specials.contains(name) || !specials[name].contains("ids") || !specials[name]["ids"].is_array()) {
          fail(source, ": post_processor TemplateProcessing: special token '", name,
               "' has no entry with 'ids' in 'special_tokens'");
        }
        for (const auto& id : specials[name]["ids"]) {
          if (!id.is_number_integer() || id.get<int64_t>() < 0) {
            fail(source, ": post_processor TemplateProcessing: special token '", name, "': ids must be non-negative integers");
          }
          result.push_back(id.get<int64_t>());
        }
      } else {
        fail(source, ": post_processor TemplateProcessing: 'single' items must be {\"Sequence\": ...} or "
                     "{\"SpecialToken\": {\"id\": ...}}");
      }
    }
    return result;
  }
  fail(source, ": post_processor type '", type,
       "' is not supported (supported: null, ByteLevel, TemplateProcessing, BertProcessing, RobertaProcessing, Sequence)");
}

}  // namespace

PostProcessor PostProcessor::from_json(const nlohmann::json& config, std::string_view source) {
  PostProcessor p;
  p.template_ = parse_template(config, source, kSequenceMarker);
  return p;
}

std::vector<int32_t> PostProcessor::apply(const std::vector<int32_t>& ids) const {
  if (template_.empty()) return ids;
  std::vector<int32_t> out;
  out.reserve(ids.size() + template_.size());
  for (const int64_t x : template_) {
    if (x == kSequenceMarker) out.insert(out.end(), ids.begin(), ids.end());
    else out.push_back(static_cast<int32_t>(x));
  }
  return out;
}

}  // namespace mi::tok
