// config.json (+ generation_config.json, tokenizer_config.json, tokenizer.json) -> ModelConfig.
// Field meanings and defaults follow the transformers configuration classes' documentation (LlamaConfig,
// Qwen3Config): num_key_value_heads defaults to num_attention_heads, head_dim to hidden_size /
// num_attention_heads, rope_theta to 10000; newer transformers move rope_theta and the scaling parameters into
// "rope_parameters".
#include "io/model_config.h"

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>

#include "common/error.h"
#include "common/json_file.h"

namespace mi::io {

namespace {

using nlohmann::json;

std::string show(const json* value) {
  if (value == nullptr) return "nothing (field missing)";
  std::string text = value->dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

// Typed access to the fields of one JSON object; every error names the file and the dotted field path.
class Fields {
 public:
  Fields(const json& object, std::string prefix, const std::string& source)
      : object_(object), prefix_(std::move(prefix)), source_(source) {}

  // nullptr when absent or null (transformers writes unset optional fields as null).
  const json* find(const char* key) const {
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }

  [[noreturn]] void wrong(const char* key, const char* expected, const json* got) const {
    fail(source_, ": field '", prefix_, key, "': expected ", expected, ", got ", show(got));
  }

  int positive_int(const char* key) const {
    const json* value = find(key);
    if (!is_int_in(value, 1)) wrong(key, "a positive integer", value);
    return value->get<int>();
  }
  std::optional<int> optional_positive_int(const char* key) const {
    const json* value = find(key);
    if (value == nullptr) return std::nullopt;
    if (!is_int_in(value, 1)) wrong(key, "a positive integer", value);
    return value->get<int>();
  }
  double positive_number(const char* key, double fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number() || !(value->get<double>() > 0)) wrong(key, "a positive number", value);
    return value->get<double>();
  }
  bool boolean(const char* key, bool fallback) const {
    const json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) wrong(key, "true or false", value);
    return value->get<bool>();
  }
  std::string string(const char* key) const {
    const json* value = find(key);
    if (value == nullptr || !value->is_string()) wrong(key, "a string", value);
    return value->get<std::string>();
  }
  // Token ids: absent/null -> {}, an integer -> {id}, a list of integers -> the list.
  std::vector<int> token_ids(const char* key) const {
    const json* value = find(key);
    if (value == nullptr) return {};
    if (is_int_in(value, 0)) return {value->get<int>()};
    if (!value->is_array()) wrong(key, "a token id or a list of token ids", value);
    std::vector<int> ids;
    for (const json& element : *value) {
      if (!is_int_in(&element, 0)) wrong(key, "a token id or a list of token ids", value);
      ids.push_back(element.get<int>());
    }
    return ids;
  }

  const std::string& source() const { return source_; }
  const std::string& prefix() const { return prefix_; }

 private:
  static bool is_int_in(const json* value, int64_t minimum) {
    if (value == nullptr || !value->is_number_integer()) return false;
    if (value->is_number_unsigned()) {  // nlohmann stores every non-negative literal as unsigned: check both bounds
      const uint64_t u = value->get<uint64_t>();
      return u <= uint64_t(std::numeric_limits<int>::max()) && (minimum <= 0 || u >= uint64_t(minimum));
    }
    int64_t v = value->get<int64_t>();
    return v >= minimum && v <= std::numeric_limits<int>::max();
  }

  const json& object_;
  std::string prefix_;
  const std::string& source_;
};

void append_unique(std::vector<int>& ids, const std::vector<int>& more) {
  for (int id : more) {
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
}

// Llama 3 frequency scaling, from "rope_scaling" (older transformers) or "rope_parameters" (newer).
std::optional<RopeScaling> parse_rope_scaling(const json& scaling, const std::string& path, const std::string& source) {
  Fields fields(scaling, path + ".", source);
  const json* type = fields.find("rope_type");
  const char* type_key = "rope_type";
  if (type == nullptr) {
    type = fields.find("type");  // the older spelling
    type_key = "type";
  }
  if (type == nullptr || !type->is_string()) fields.wrong("rope_type", "a string naming the rope scaling type", type);
  const std::string kind = type->get<std::string>();
  if (kind == "default") return std::nullopt;
  if (kind != "llama3")
    fail(source, ": field '", path, ".", type_key, "': unsupported rope scaling type '", kind,
         "' (metainfer covers 'default' and 'llama3')");
  RopeScaling rope;
  rope.rope_type = kind;
  auto required_number = [&](const char* key) {
    const json* value = fields.find(key);
    if (value == nullptr || !value->is_number() || !(value->get<double>() > 0))
      fields.wrong(key, "a positive number", value);
    return value->get<double>();
  };
  rope.factor = required_number("factor");
  rope.low_freq_factor = required_number("low_freq_factor");
  rope.high_freq_factor = required_number("high_freq_factor");
  rope.original_max_position_embeddings = fields.positive_int("original_max_position_embeddings");
  if (!(rope.high_freq_factor > rope.low_freq_factor))
    fail(source, ": field '", path, "': high_freq_factor (", rope.high_freq_factor,
         ") must be greater than low_freq_factor (", rope.low_freq_factor, ")");
  return rope;
}

// What tokenizer.json says about ids: the added tokens and the model vocabulary, and the largest id.
struct TokenizerIds {
  std::map<std::string, int> id_of;  // added tokens and model vocabulary
  int max_id = -1;
  std::string max_token;
};

// Streams tokenizer.json (several MB) through nlohmann's SAX interface and keeps only the ids: "added_tokens"
// [{"id", "content"}], "model"."vocab" as {token: id} (BPE, WordPiece, WordLevel) or [[piece, score], ...]
// (Unigram, the id is the position). Building a DOM of the whole file would cost about a second and hundreds of
// MB for nothing else. Containers are tracked by the key (or array position) they sit under.
class TokenizerIdsReader : public nlohmann::json_sax<json> {
 public:
  explicit TokenizerIdsReader(std::string source) : source_(std::move(source)) {}
  TokenizerIds ids;
  bool saw_root_object = false;

  bool null() override { return scalar(nullptr); }
  bool boolean(bool) override { return scalar(nullptr); }
  bool number_integer(number_integer_t v) override { return integer(v); }
  bool number_unsigned(number_unsigned_t v) override {
    return integer(v > uint64_t(std::numeric_limits<int64_t>::max()) ? -1 : int64_t(v));
  }
  bool number_float(number_float_t, const string_t&) override { return scalar(nullptr); }
  bool binary(binary_t&) override { return scalar(nullptr); }
  bool string(string_t& value) override {
    if (in_added_token()) {
      if (key_ == "content") added_content_ = value;
    } else if (in_unigram_entry() && stack_.back().index == 0) {
      unigram_piece_ = value;
    } else if (in_vocab_object()) {
      wrong_id("model.vocab", key_, "\"" + value + "\"");
    }
    return advance();
  }
  bool start_object(std::size_t) override {
    if (in_added_tokens_array()) {
      added_id_ = -2;  // -2: no "id" seen
      added_content_.reset();
    }
    if (stack_.empty()) saw_root_object = true;
    stack_.push_back({false, key_of_next_container(), 0});
    return true;
  }
  bool key(string_t& value) override {
    key_ = value;
    return true;
  }
  bool end_object() override {
    const bool was_added_token = in_added_token();
    stack_.pop_back();
    if (was_added_token) {
      if (added_id_ == -2 || !added_content_)
        fail(source_, ": field 'added_tokens': expected objects with 'id' and 'content'");
      record(*added_content_, added_id_, "added_tokens");
    }
    return advance();
  }
  bool start_array(std::size_t) override {
    if (in_unigram_array()) unigram_piece_.clear();
    stack_.push_back({true, key_of_next_container(), 0});
    return true;
  }
  bool end_array() override {
    const bool was_unigram_entry = in_unigram_entry();
    stack_.pop_back();
    if (was_unigram_entry) record(unigram_piece_, int64_t(stack_.back().index), "model.vocab");
    return advance();
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    fail(source_, ": not valid JSON (byte ", position, "): ", e.what());
  }

 private:
  struct Frame {
    bool is_array;
    std::string key;    // the key this container is the value of ("" for the root and array elements)
    std::size_t index;  // for arrays: position of the next element
  };

  std::string key_of_next_container() const {
    return stack_.empty() || stack_.back().is_array ? std::string() : key_;
  }
  // After a value inside an array, move to the next position.
  bool advance() {
    if (!stack_.empty() && stack_.back().is_array) ++stack_.back().index;
    return true;
  }
  bool scalar(std::nullptr_t) {
    if (in_vocab_object()) wrong_id("model.vocab", key_, "a non-integer");
    if (in_added_token() && key_ == "id") wrong_id("added_tokens", "?", "a non-integer");
    return advance();
  }
  bool integer(int64_t value) {
    if (in_added_token()) {
      if (key_ == "id") {
        if (value < 0 || value > std::numeric_limits<int>::max()) wrong_id("added_tokens", "?", std::to_string(value));
        added_id_ = value;
      }
    } else if (in_vocab_object()) {
      record(key_, value, "model.vocab");
    }
    return advance();
  }
  [[noreturn]] void wrong_id(const char* where, const std::string& token, const std::string& got) {
    fail(source_, ": ", where, ": token '", token, "': expected a non-negative integer id, got ", got);
  }
  void record(const std::string& token, int64_t id, const char* where) {
    if (id < 0 || id > std::numeric_limits<int>::max()) wrong_id(where, token, std::to_string(id));
    ids.id_of.emplace(token, int(id));
    if (id > ids.max_id) {
      ids.max_id = int(id);
      ids.max_token = token;
    }
  }
  // Stack shapes: [root] [root, model-object] [root, model-object, vocab] ...
  bool at(std::size_t depth) const { return stack_.size() == depth; }
  bool in_added_tokens_array() const { return at(2) && stack_[1].is_array && stack_[1].key == "added_tokens"; }
  bool in_added_token() const {
    return at(3) && stack_[1].is_array && stack_[1].key == "added_tokens" && !stack_[2].is_array;
  }
  bool in_model() const { return stack_.size() >= 2 && !stack_[1].is_array && stack_[1].key == "model"; }
  bool in_vocab_object() const { return at(3) && in_model() && !stack_[2].is_array && stack_[2].key == "vocab"; }
  bool in_unigram_array() const { return at(3) && in_model() && stack_[2].is_array && stack_[2].key == "vocab"; }
  bool in_unigram_entry() const {
    return at(4) && in_model() && stack_[2].is_array && stack_[2].key == "vocab" && stack_[3].is_array;
  }

  std::string source_;
  std::vector<Frame> stack_;
  std::string key_;
  int64_t added_id_ = -2;
  std::optional<std::string> added_content_;
  std::string unigram_piece_;
};

TokenizerIds read_tokenizer_ids(const std::filesystem::path& path) {
  const std::string source = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(source, ": cannot open file");
  TokenizerIdsReader reader(source);
  json::sax_parse(in, &reader);
  if (!reader.saw_root_object) fail(source, ": expected a JSON object");
  return std::move(reader.ids);
}

// tokenizer_config.json names special tokens by text: "eos_token": "<|im_end|>" or {"content": "<|im_end|>", ...}.
std::optional<std::string> special_token_text(const json& config, const char* key, const std::string& source) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object() && it->contains("content") && (*it)["content"].is_string())
    return (*it)["content"].get<std::string>();
  fail(source, ": field '", key, "': expected a token string or {\"content\": string}, got ", show(&*it));
}

// Resolves a special token's text to its id: tokenizer_config.json's "added_tokens_decoder" ({"id": {"content"}}),
// then tokenizer.json. nullopt when neither knows it.
std::optional<int> resolve_token(const std::string& text, const json& tokenizer_config,
                                 const std::optional<TokenizerIds>& tokenizer) {
  if (auto decoder = tokenizer_config.find("added_tokens_decoder");
      decoder != tokenizer_config.end() && decoder->is_object()) {
    for (auto& [id_text, entry] : decoder->items()) {
      if (!entry.is_object() || entry.value("content", json()) != text) continue;
      try {
        std::size_t used = 0;
        int id = std::stoi(id_text, &used);
        if (used == id_text.size() && id >= 0) return id;
      } catch (const std::exception&) {
      }
    }
  }
  if (tokenizer) {
    auto it = tokenizer->id_of.find(text);
    if (it != tokenizer->id_of.end()) return it->second;
  }
  return std::nullopt;
}

void check_ids_in_vocab(const std::vector<int>& ids, const char* what, const ModelConfig& config,
                        const std::string& dir) {
  for (int id : ids) {
    if (id >= config.vocab_size)
      fail(dir, ": ", what, " ", id, " is outside the vocabulary (config.json vocab_size ", config.vocab_size, ")");
  }
}

}  // namespace

std::optional<int64_t> config_bound(std::string_view field) {
  for (const ConfigBound& b : kConfigBounds)
    if (field == b.field) return b.max;
  return std::nullopt;
}

void check_config_bounds(const nlohmann::json& config, const std::string& source, const std::string& prefix) {
  if (!config.is_object()) return;
  auto number = [&](const char* key) -> std::optional<double> {
    auto it = config.find(key);
    if (it == config.end() || !it->is_number()) return std::nullopt;
    return it->get<double>();
  };
  for (const ConfigBound& b : kConfigBounds) {
    const std::optional<double> v = number(b.field);
    if (v && !(*v <= double(b.max)))
      fail(source, ": field '", prefix, b.field, "': ", show(&config[b.field]), " exceeds metainfer's bound of ", b.max,
           " (every released model fits; config values are bounded before anything is sized by them)");
  }
  const std::optional<double> heads = number("num_attention_heads"), kv = number("num_key_value_heads"),
                              head_dim = number("head_dim");
  for (const auto& [h, name] : {std::pair{heads, "num_attention_heads"}, std::pair{kv, "num_key_value_heads"}})
    if (h && head_dim && *h * *head_dim > double(kMaxAttentionWidth))
      fail(source, ": field '", prefix, name, "': ", name, " * head_dim = ", int64_t(*h * *head_dim),
           " exceeds metainfer's bound of ", kMaxAttentionWidth, " on the attention width");
  for (const char* nested : {"rope_scaling", "rope_parameters"})
    if (auto it = config.find(nested); it != config.end() && it->is_object())
      check_config_bounds(*it, source, prefix + nested + ".");
  if (prefix.empty())
    if (auto it = config.find("text_config"); it != config.end() && it->is_object())
      check_config_bounds(*it, source, "text_config.");
}

nlohmann::json computation_relevant_config(const nlohmann::json& config, const std::vector<std::string>& ignored) {
  if (!config.is_object()) return config;
  json out = json::object();
  for (const auto& [key, value] : config.items()) {
    if (value.is_null() || std::find(ignored.begin(), ignored.end(), key) != ignored.end()) continue;
    out[key] = computation_relevant_config(value, ignored);
  }
  return out;
}

namespace {

void compare_config(const json& actual, const json& expected, const std::string& path, const std::string& source) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : expected.items()) keys.push_back(k);
  for (const auto& [k, v] : actual.items())
    if (!expected.contains(k)) keys.push_back(k);
  std::sort(keys.begin(), keys.end());
  for (const std::string& key : keys) {
    auto a = actual.find(key);
    auto e = expected.find(key);
    const json* av = a == actual.end() || a->is_null() ? nullptr : &*a;
    const json* ev = e == expected.end() || e->is_null() ? nullptr : &*e;
    if (av && ev && av->is_object() && ev->is_object()) {
      compare_config(*av, *ev, path + key + ".", source);
      continue;
    }
    if (av == nullptr && ev == nullptr) continue;
    if (av && ev && *av == *ev) continue;
    fail(source, ": field '", path, key, "': this engine was generated for ",
         ev ? show(ev) : std::string("nothing (field absent)"), ", the checkpoint has ",
         av ? show(av) : std::string("nothing (field missing)"),
         " (the engine runs only the model it was generated for; regenerate it for this checkpoint)");
  }
}

}  // namespace

void check_config_matches(const nlohmann::json& checkpoint, const nlohmann::json& expected,
                          const std::vector<std::string>& ignored, const std::string& source) {
  if (!checkpoint.is_object()) fail(source, ": expected a JSON object, got ", show(&checkpoint));
  compare_config(computation_relevant_config(checkpoint, ignored), computation_relevant_config(expected, ignored), "",
                 source);
}

void check_checkpoint_config(const std::filesystem::path& config_path, const char* expected_json,
                             const char* ignored_fields_json) {
  check_config_matches(read_json_file(config_path), nlohmann::json::parse(expected_json),
                       nlohmann::json::parse(ignored_fields_json).get<std::vector<std::string>>(), config_path.string());
}

const nlohmann::json& text_config_of(const nlohmann::json& root) {
  auto it = root.find("text_config");
  if (it != root.end() && it->is_object()) return *it;
  return root;
}

ModelConfig parse_model_config(const nlohmann::json& root, const std::string& source) {
  if (!root.is_object()) fail(source, ": expected a JSON object, got ", show(&root));
  check_config_bounds(root, source);
  const json& text = text_config_of(root);
  const bool nested = &text != &root;
  Fields top(root, "", source);
  Fields fields(text, nested ? "text_config." : "", source);

  ModelConfig config;
  const json* architectures = top.find("architectures");
  if (architectures == nullptr || !architectures->is_array() || architectures->empty() ||
      !(*architectures)[0].is_string())
    top.wrong("architectures", "a non-empty list of class names", architectures);
  config.architecture = (*architectures)[0].get<std::string>();
  config.model_type = fields.string("model_type");

  config.vocab_size = fields.positive_int("vocab_size");
  config.hidden_size = fields.positive_int("hidden_size");
  config.intermediate_size = fields.positive_int("intermediate_size");
  config.num_hidden_layers = fields.positive_int("num_hidden_layers");
  config.num_attention_heads = fields.positive_int("num_attention_heads");
  config.num_key_value_heads = fields.optional_positive_int("num_key_value_heads").value_or(config.num_attention_heads);
  if (config.num_attention_heads % config.num_key_value_heads != 0)
    fail(source, ": field '", fields.prefix(), "num_key_value_heads': expected a divisor of num_attention_heads (",
         config.num_attention_heads, "), got ", config.num_key_value_heads);
  if (auto head_dim = fields.optional_positive_int("head_dim")) {
    config.head_dim = *head_dim;
  } else {
    if (config.hidden_size % config.num_attention_heads != 0)
      fail(source, ": field '", fields.prefix(), "head_dim' is absent and hidden_size (", config.hidden_size,
           ") is not divisible by num_attention_heads (", config.num_attention_heads, ")");
    config.head_dim = config.hidden_size / config.num_attention_heads;
  }
  config.max_position_embeddings = fields.positive_int("max_position_embeddings");
  config.rms_norm_eps = fields.positive_number("rms_norm_eps", 1e-6);
  config.attention_bias = fields.boolean("attention_bias", false);
  // Absent: false, the LlamaConfig and Qwen3Config default. Multimodal wrappers may keep it at the root.
  config.tie_word_embeddings =
      fields.find("tie_word_embeddings") ? fields.boolean("tie_word_embeddings", false)
                                         : top.boolean("tie_word_embeddings", false);

  // "dtype" (transformers >= 4.56) supersedes "torch_dtype".
  for (const Fields* where : {&fields, &top}) {
    for (const char* key : {"dtype", "torch_dtype"}) {
      if (!config.torch_dtype.empty()) break;
      if (where->find(key)) config.torch_dtype = where->string(key);
    }
  }

  const json* rope_parameters = fields.find("rope_parameters");
  if (rope_parameters != nullptr && !rope_parameters->is_object())
    fields.wrong("rope_parameters", "an object", rope_parameters);
  if (fields.find("rope_theta")) {
    config.rope_theta = fields.positive_number("rope_theta", 10000.0);
  } else if (rope_parameters != nullptr) {
    config.rope_theta = Fields(*rope_parameters, fields.prefix() + "rope_parameters.", source)
                            .positive_number("rope_theta", 10000.0);
  }
  if (const json* scaling = fields.find("rope_scaling")) {
    if (!scaling->is_object()) fields.wrong("rope_scaling", "an object or null", scaling);
    config.rope_scaling = parse_rope_scaling(*scaling, fields.prefix() + "rope_scaling", source);
  } else if (rope_parameters != nullptr &&
             (rope_parameters->contains("rope_type") || rope_parameters->contains("type"))) {
    config.rope_scaling = parse_rope_scaling(*rope_parameters, fields.prefix() + "rope_parameters", source);
  }

  std::vector<int> bos = fields.token_ids("bos_token_id");
  if (bos.empty() && nested) bos = top.token_ids("bos_token_id");
  if (bos.size() > 1) fields.wrong("bos_token_id", "a single token id", fields.find("bos_token_id"));
  if (!bos.empty()) config.bos_token_id = bos[0];
  config.eos_token_ids = fields.token_ids("eos_token_id");
  if (nested) append_unique(config.eos_token_ids, top.token_ids("eos_token_id"));
  check_ids_in_vocab(config.eos_token_ids, "eos_token_id", config, source);
  if (config.bos_token_id) check_ids_in_vocab({*config.bos_token_id}, "bos_token_id", config, source);
  return config;
}

ModelConfig load_model_config(const std::filesystem::path& checkpoint_dir) {
  namespace fs = std::filesystem;
  const fs::path config_path = checkpoint_dir / "config.json";
  std::error_code ec;
  if (!fs::exists(config_path, ec)) fail(checkpoint_dir.string(), ": no config.json");
  ModelConfig config = parse_model_config(read_json_file(config_path), config_path.string());

  // generation_config.json: what generate() uses, so its BOS wins over config.json's.
  const fs::path generation_path = checkpoint_dir / "generation_config.json";
  if (fs::exists(generation_path, ec)) {
    const json generation = read_json_file(generation_path);
    if (!generation.is_object()) fail(generation_path.string(), ": expected a JSON object");
    const std::string source = generation_path.string();
    Fields fields(generation, "", source);
    std::vector<int> bos = fields.token_ids("bos_token_id");
    if (bos.size() > 1) fields.wrong("bos_token_id", "a single token id", fields.find("bos_token_id"));
    std::vector<int> eos = fields.token_ids("eos_token_id");
    check_ids_in_vocab(bos, "bos_token_id", config, source);
    check_ids_in_vocab(eos, "eos_token_id", config, source);
    if (!bos.empty()) config.bos_token_id = bos[0];
    append_unique(config.eos_token_ids, eos);
  }

  std::optional<TokenizerIds> tokenizer;
  const fs::path tokenizer_path = checkpoint_dir / "tokenizer.json";
  if (fs::exists(tokenizer_path, ec)) {
    tokenizer = read_tokenizer_ids(tokenizer_path);
    config.tokenizer_vocab_size = tokenizer->max_id + 1;
    // The embedding may have more rows than the tokenizer has ids (padded for efficiency); fewer is a mismatch
    // that would index past the embedding.
    if (tokenizer->max_id >= config.vocab_size)
      fail(tokenizer_path.string(), ": token '", tokenizer->max_token, "' has id ", tokenizer->max_id,
           ", outside the model's vocabulary (config.json vocab_size ", config.vocab_size,
           "): tokenizer and checkpoint do not match");
  }

  const fs::path tokenizer_config_path = checkpoint_dir / "tokenizer_config.json";
  if (fs::exists(tokenizer_config_path, ec)) {
    const json tokenizer_config = read_json_file(tokenizer_config_path);
    const std::string source = tokenizer_config_path.string();
    if (!tokenizer_config.is_object()) fail(source, ": expected a JSON object");
    for (const char* key : {"bos_token", "eos_token"}) {
      std::optional<std::string> text = special_token_text(tokenizer_config, key, source);
      if (!text) continue;
      std::optional<int> id = resolve_token(*text, tokenizer_config, tokenizer);
      if (!id) {
        // Without tokenizer.json some texts cannot be resolved; with it, an unknown token is an inconsistency.
        if (tokenizer) fail(source, ": field '", key, "': token '", *text, "' is not in tokenizer.json");
        continue;
      }
      check_ids_in_vocab({*id}, key, config, source);
      if (std::string(key) == "eos_token") {
        append_unique(config.eos_token_ids, {*id});
      } else if (!config.bos_token_id) {
        config.bos_token_id = *id;
      }
    }
  }
  return config;
}

}  // namespace mi::io
