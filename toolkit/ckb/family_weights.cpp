#include "ckb/family_weights.h"

#include <sstream>

#include "common/error.h"
#include "io/model_config.h"

namespace mi::ckb {

std::optional<int64_t> config_term(const nlohmann::json& cfg, const std::string& term) {
  auto integer = [&](const char* key) -> std::optional<int64_t> {
    auto it = cfg.find(key);
    if (it == cfg.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<int64_t>();
  };
  if (term == "head_dim") {
    if (auto v = integer("head_dim")) return v;
    auto hidden = integer("hidden_size"), heads = integer("num_attention_heads");
    if (hidden && heads && *heads > 0) return *hidden / *heads;
    return std::nullopt;
  }
  if (term == "num_key_value_heads") {
    if (auto v = integer("num_key_value_heads")) return v;
    return integer("num_attention_heads");
  }
  return integer(term.c_str());
}

int64_t eval_shape_expr(const std::string& expr, const nlohmann::json& cfg, const std::string& context) {
  int64_t value = 1;
  std::stringstream ss(expr);
  std::string term;
  while (std::getline(ss, term, '*')) {
    if (!term.empty() && term.find_first_not_of("0123456789") == std::string::npos) {
      if (__builtin_mul_overflow(value, std::stoll(term), &value))
        fail(context, ": shape expression '", expr, "' overflows 64 bits");
      continue;
    }
    auto v = config_term(cfg, term);
    if (!v) fail(context, ": config.json has no integer '", term, "' (needed for shape expression '", expr, "')");
    if (const auto bound = io::config_bound(term); bound && (*v < 0 || *v > *bound))
      fail(context, ": config.json '", term, "' = ", *v, " is outside 0..", *bound, " (metainfer's bound)");
    if (__builtin_mul_overflow(value, *v, &value))
      fail(context, ": shape expression '", expr, "' overflows 64 bits for this config.json");
  }
  return value;
}

namespace {
std::string with_layer(const std::string& pattern, int layer) {
  std::string out = pattern;
  const auto pos = out.find("{L}");
  if (pos != std::string::npos) out.replace(pos, 3, std::to_string(layer));
  return out;
}
}  // namespace

std::vector<ExpectedTensor> expected_weights(const Family& family, const nlohmann::json& cfg, bool tied) {
  // eval_shape_expr bounds the layer count (io::kConfigBounds) before the list is sized by it.
  const int64_t layers = eval_shape_expr("num_hidden_layers", cfg, family.source.string());
  std::vector<ExpectedTensor> out;
  for (const auto& w : family.weights) {
    if ((w.when == "tied" && !tied) || (w.when == "untied" && tied)) continue;
    std::vector<int64_t> shape;
    for (const auto& e : w.shape) shape.push_back(eval_shape_expr(e, cfg, "weight " + w.name));
    const bool per_layer = w.name.find("{L}") != std::string::npos;
    for (int64_t l = 0; l < (per_layer ? layers : 1); ++l) out.push_back({with_layer(w.name, int(l)), shape, w.contract});
  }
  return out;
}

bool family_declares(const Family& family, const std::string& name) {
  for (const auto& w : family.weights) {
    const auto pos = w.name.find("{L}");
    if (pos == std::string::npos) {
      if (w.name == name) return true;
      continue;
    }
    const std::string prefix = w.name.substr(0, pos), suffix = w.name.substr(pos + 3);
    if (name.size() <= prefix.size() + suffix.size()) continue;
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    if (name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    const std::string index = name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
    if (!index.empty() && index.find_first_not_of("0123456789") == std::string::npos) return true;
  }
  return false;
}

}  // namespace mi::ckb
