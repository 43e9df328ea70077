#include "ckb/family_weights.h"

#include <sstream>

#include "ckb/glob.h"
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

namespace {
int64_t eval_product(const std::string& expr, const std::string& product, const nlohmann::json& cfg,
                     const std::string& context) {
  int64_t value = 1;
  std::stringstream ss(product);
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
    if (*v < 0) fail(context, ": config.json '", term, "' = ", *v, " is negative (shape expression '", expr, "')");
    if (__builtin_mul_overflow(value, *v, &value))
      fail(context, ": shape expression '", expr, "' overflows 64 bits for this config.json");
  }
  return value;
}
}  // namespace

int64_t eval_shape_expr(const std::string& expr, const nlohmann::json& cfg, const std::string& context) {
  int64_t value = 0;
  std::stringstream ss(expr);
  std::string product;
  while (std::getline(ss, product, '+'))
    if (__builtin_add_overflow(value, eval_product(expr, product, cfg, context), &value))
      fail(context, ": shape expression '", expr, "' overflows 64 bits for this config.json");
  return value;
}

namespace {
std::string with_index(const std::string& pattern, const char* placeholder, int64_t index) {
  std::string out = pattern;
  const auto pos = out.find(placeholder);
  if (pos != std::string::npos) out.replace(pos, 3, std::to_string(index));
  return out;
}

// The name as stored under the name map (prefix replaced), or the declared name.
std::string stored_name(const std::string& declared, const NameMap* map) {
  if (!map || declared.compare(0, map->prefix.size(), map->prefix) != 0) return declared;
  return map->replacement + declared.substr(map->prefix.size());
}

// `name` matches `pattern` where each {L} / {E} stands for a non-empty run of digits.
bool matches_indexed(const std::string& pattern, const std::string& name) {
  std::size_t p = 0, n = 0;
  while (p < pattern.size()) {
    if (pattern.compare(p, 3, "{L}") == 0 || pattern.compare(p, 3, "{E}") == 0) {
      const std::size_t start = n;
      while (n < name.size() && name[n] >= '0' && name[n] <= '9') ++n;
      if (n == start) return false;
      p += 3;
      continue;
    }
    if (n >= name.size() || pattern[p] != name[n]) return false;
    ++p;
    ++n;
  }
  return n == name.size();
}
}  // namespace

std::vector<int> layers_of_kind(const LayerKind& kind, const nlohmann::json& cfg, const std::string& context) {
  const int64_t layers = eval_shape_expr("num_hidden_layers", cfg, context);
  std::vector<int> out;
  if (kind.layer_type == "*") {
    for (int64_t l = 0; l < layers; ++l) out.push_back(int(l));
    return out;
  }
  const nlohmann::json types = effective_layer_types(cfg);
  if (!types.is_array() || int64_t(types.size()) != layers)
    fail("config.json: field 'layer_types': ", types.is_null() ? std::string("missing") : "has " + std::to_string(types.size()) + " entries",
         " (and no full_attention_interval to derive it from); ", context, " needs one entry per layer (num_hidden_layers = ",
         layers, ")");
  for (std::size_t l = 0; l < types.size(); ++l)
    if (types[l].is_string() && types[l].get<std::string>() == kind.layer_type) out.push_back(int(l));
  return out;
}

nlohmann::json effective_layer_types(const nlohmann::json& cfg) {
  if (const auto it = cfg.find("layer_types"); it != cfg.end() && !it->is_null()) return *it;
  const auto interval = cfg.find("full_attention_interval");
  const auto layers = cfg.find("num_hidden_layers");
  if (interval == cfg.end() || !interval->is_number_integer() || interval->get<int64_t>() <= 0 || layers == cfg.end() ||
      !layers->is_number_integer() || layers->get<int64_t>() <= 0 || layers->get<int64_t>() > (int64_t(1) << 16))
    return nullptr;
  const int64_t every = interval->get<int64_t>();
  nlohmann::json out = nlohmann::json::array();
  for (int64_t i = 0; i < layers->get<int64_t>(); ++i)
    out.push_back((i + 1) % every == 0 ? "full_attention" : "linear_attention");
  return out;
}

std::vector<ExpectedTensor> expected_weights(const Family& family, const nlohmann::json& cfg, bool tied,
                                             const std::string& architecture) {
  // eval_shape_expr bounds the layer count (io::kConfigBounds) before the list is sized by it.
  const int64_t layers = eval_shape_expr("num_hidden_layers", cfg, family.source.string());
  const NameMap* map = family.name_map_for(architecture);
  std::vector<ExpectedTensor> out;
  for (const auto& w : family.weights) {
    if ((w.when == "tied" && !tied) || (w.when == "untied" && tied)) continue;
    std::vector<int64_t> shape;
    for (const auto& e : w.shape) shape.push_back(eval_shape_expr(e, cfg, "weight " + w.name));
    std::vector<int> layer_list;
    if (w.name.find("{L}") == std::string::npos) {
      layer_list.push_back(-1);
    } else if (!w.kind.empty()) {
      const LayerKind* kind = family.find_layer_kind(w.kind);
      if (!kind) fail(family.source.string(), ": weight ", w.name, " names unknown layer kind '", w.kind, "'");
      layer_list = layers_of_kind(*kind, cfg, family.source.string());
    } else {
      for (int64_t l = 0; l < layers; ++l) layer_list.push_back(int(l));
    }
    const int64_t experts =
        w.name.find("{E}") == std::string::npos ? 1 : eval_shape_expr("num_experts", cfg, "weight " + w.name);
    // The expert count sizes the list: bounded before it is used (no released model has more than a few hundred).
    if (experts < 0 || experts > 65536)
      fail("weight ", w.name, ": config.json 'num_experts' = ", experts, " is outside 0..65536 (metainfer's bound)");
    const std::string name = stored_name(w.name, map);
    for (int l : layer_list)
      for (int64_t e = 0; e < experts; ++e)
        out.push_back({with_index(with_index(name, "{L}", l), "{E}", e), shape, w.contract});
  }
  return out;
}

bool family_declares(const Family& family, const std::string& name, const std::string& architecture) {
  const NameMap* map = family.name_map_for(architecture);
  if (map)
    for (const auto& g : map->ignore)
      if (glob_match(g, name)) return true;
  for (const auto& w : family.weights)
    if (matches_indexed(stored_name(w.name, map), name)) return true;
  return false;
}

std::string weight_role(const WeightDecl& weight) {
  if (!weight.role.empty()) return weight.role;
  const std::string& name = weight.name;
  auto replace_all = [](std::string text, const std::string& from, const std::string& to) {
    for (std::size_t pos = 0; (pos = text.find(from, pos)) != std::string::npos; pos += to.size())
      text.replace(pos, from.size(), to);
    return text;
  };
  const std::string marker = "layers.{L}.";
  if (const std::size_t pos = name.find(marker); pos != std::string::npos) {
    std::string rest = replace_all(name.substr(pos + marker.size()), ".{E}", "");
    if (rest.size() > 7 && rest.compare(rest.size() - 7, 7, ".weight") == 0) rest.resize(rest.size() - 7);
    return replace_all(rest, ".", "_");
  }
  std::vector<std::string> parts;
  std::stringstream ss(name);
  for (std::string p; std::getline(ss, p, '.');) parts.push_back(p);
  if (parts.size() < 2) fail("weight name '", name, "' has no module component");
  return parts[parts.size() - 2];
}

}  // namespace mi::ckb
