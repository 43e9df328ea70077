// config.json -> ModelConfig: the golden configs, defaults, nested text_config, rope scaling, special tokens from
// the three files that can name them, the tokenizer-size check, and the error for each kind of bad field.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/json_file.h"
#include "io/model_config.h"
#include "io_test_util.h"

namespace mi::io {
namespace {

using nlohmann::json;
using test::error_of;
using test::ScratchDir;

const std::filesystem::path kGolden = std::filesystem::path(METAINFER_TEST_DATA) / "golden";

json golden_config(const std::string& case_name) { return read_json_file(kGolden / case_name / "config.json"); }

std::string config_error(const json& root) { return error_of([&] { parse_model_config(root, "config.json"); }); }

TEST(ModelConfig, GoldenQwen3Tiny) {
  ModelConfig c = load_model_config(kGolden / "qwen3-tiny");
  EXPECT_EQ(c.architecture, "Qwen3ForCausalLM");
  EXPECT_EQ(c.model_type, "qwen3");
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.intermediate_size, 256);
  EXPECT_EQ(c.num_hidden_layers, 3);
  EXPECT_EQ(c.num_attention_heads, 4);
  EXPECT_EQ(c.num_key_value_heads, 2);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_EQ(c.max_position_embeddings, 512);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e6);
  EXPECT_FALSE(c.rope_scaling.has_value());
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_FALSE(c.attention_bias);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_FALSE(c.bos_token_id.has_value());  // README: the golden configs name no special tokens
  EXPECT_TRUE(c.eos_token_ids.empty());
  EXPECT_FALSE(c.tokenizer_vocab_size.has_value());
}

TEST(ModelConfig, GoldenLlamaAndHd128) {
  ModelConfig llama = load_model_config(kGolden / "llama-tiny");
  EXPECT_EQ(llama.architecture, "LlamaForCausalLM");
  EXPECT_FALSE(llama.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(llama.rope_theta, 10000.0);
  EXPECT_FALSE(llama.rope_scaling.has_value());
  EXPECT_FALSE(llama.bos_token_id.has_value());

  ModelConfig hd128 = load_model_config(kGolden / "qwen3-hd128");
  EXPECT_EQ(hd128.hidden_size, 256);
  EXPECT_EQ(hd128.head_dim, 128);  // heads x head_dim = 512 != hidden
  EXPECT_EQ(hd128.num_key_value_heads, 1);
  EXPECT_EQ(hd128.intermediate_size, 384);
  EXPECT_FALSE(hd128.tie_word_embeddings);
}

TEST(ModelConfig, RopeThetaFromRopeParameters) {
  ModelConfig c = load_model_config(kGolden / "qwen3_5-tiny");  // transformers 5: theta inside rope_parameters
  EXPECT_EQ(c.model_type, "qwen3_5_text");
  EXPECT_DOUBLE_EQ(c.rope_theta, 1e7);
  EXPECT_FALSE(c.rope_scaling.has_value());  // rope_type "default"
}

TEST(ModelConfig, DefaultsForAbsentOptionalFields) {
  json root = golden_config("llama-tiny");
  for (const char* key : {"head_dim", "num_key_value_heads", "tie_word_embeddings", "rope_theta", "rms_norm_eps"})
    root.erase(key);
  ModelConfig c = parse_model_config(root, "config.json");
  EXPECT_EQ(c.head_dim, 128 / 4);
  EXPECT_EQ(c.num_key_value_heads, 4);
  EXPECT_FALSE(c.tie_word_embeddings);
  EXPECT_DOUBLE_EQ(c.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(c.rms_norm_eps, 1e-6);
}

TEST(ModelConfig, MissingKeyAndWrongTypeNameTheField) {
  json root = golden_config("qwen3-tiny");
  root.erase("hidden_size");
  EXPECT_EQ(config_error(root),
            "config.json: field 'hidden_size': expected a positive integer, got nothing (field missing)");
  root = golden_config("qwen3-tiny");
  root["hidden_size"] = "abc";
  EXPECT_EQ(config_error(root), "config.json: field 'hidden_size': expected a positive integer, got \"abc\"");
  root = golden_config("qwen3-tiny");
  root["num_hidden_layers"] = 2.5;
  EXPECT_ERROR_HAS(config_error(root), "field 'num_hidden_layers': expected a positive integer, got 2.5");
  root = golden_config("qwen3-tiny");
  root["tie_word_embeddings"] = "yes";
  EXPECT_ERROR_HAS(config_error(root), "field 'tie_word_embeddings': expected true or false, got \"yes\"");
  root = golden_config("qwen3-tiny");
  root.erase("architectures");
  EXPECT_ERROR_HAS(config_error(root), "field 'architectures': expected a non-empty list of class names");
  root = golden_config("qwen3-tiny");
  root["num_key_value_heads"] = 3;
  EXPECT_ERROR_HAS(config_error(root), "field 'num_key_value_heads': expected a divisor of num_attention_heads (4)");
  root = golden_config("qwen3-tiny");
  root["eos_token_id"] = 600;
  EXPECT_ERROR_HAS(config_error(root), "eos_token_id 600 is outside the vocabulary (config.json vocab_size 512)");
  root = golden_config("qwen3-tiny");
  root["eos_token_id"] = json::array({1, "two"});
  EXPECT_ERROR_HAS(config_error(root), "field 'eos_token_id': expected a token id or a list of token ids");
}

TEST(ModelConfig, NestedTextConfig) {
  json text = golden_config("qwen3-tiny");
  text.erase("architectures");
  json root = {{"architectures", {"Qwen3ForConditionalGeneration"}},
               {"model_type", "qwen3_vl"},
               {"eos_token_id", 7},
               {"text_config", text}};
  root["text_config"]["eos_token_id"] = json::array({5, 7});
  ModelConfig c = parse_model_config(root, "config.json");
  EXPECT_EQ(&text_config_of(root), &root["text_config"]);
  EXPECT_EQ(c.architecture, "Qwen3ForConditionalGeneration");
  EXPECT_EQ(c.model_type, "qwen3");  // the text model's type
  EXPECT_EQ(c.hidden_size, 128);
  EXPECT_EQ(c.head_dim, 32);
  EXPECT_TRUE(c.tie_word_embeddings);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{5, 7}));
  root["text_config"].erase("vocab_size");
  EXPECT_ERROR_HAS(config_error(root), "config.json: field 'text_config.vocab_size': expected a positive integer");
}

json llama3_scaling() {
  return {{"rope_type", "llama3"},
          {"factor", 8.0},
          {"low_freq_factor", 1.0},
          {"high_freq_factor", 4.0},
          {"original_max_position_embeddings", 8192}};
}

TEST(ModelConfig, Llama3RopeScaling) {
  json root = golden_config("llama-tiny");
  root["rope_scaling"] = llama3_scaling();
  root["rope_theta"] = 500000.0;
  ModelConfig c = parse_model_config(root, "config.json");
  ASSERT_TRUE(c.rope_scaling.has_value());
  EXPECT_EQ(c.rope_scaling->rope_type, "llama3");
  EXPECT_DOUBLE_EQ(c.rope_scaling->factor, 8.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->low_freq_factor, 1.0);
  EXPECT_DOUBLE_EQ(c.rope_scaling->high_freq_factor, 4.0);
  EXPECT_EQ(c.rope_scaling->original_max_position_embeddings, 8192);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);

  // The older spelling "type", and transformers 5's rope_parameters carrying theta and scaling together.
  root["rope_scaling"].erase("rope_type");
  root["rope_scaling"]["type"] = "llama3";
  EXPECT_DOUBLE_EQ(parse_model_config(root, "config.json").rope_scaling->factor, 8.0);
  json v5 = golden_config("llama-tiny");
  v5.erase("rope_scaling");
  v5.erase("rope_theta");
  v5["rope_parameters"] = llama3_scaling();
  v5["rope_parameters"]["rope_theta"] = 500000.0;
  v5["rope_parameters"]["factor"] = 32.0;
  ModelConfig c5 = parse_model_config(v5, "config.json");
  ASSERT_TRUE(c5.rope_scaling.has_value());
  EXPECT_DOUBLE_EQ(c5.rope_scaling->factor, 32.0);
  EXPECT_DOUBLE_EQ(c5.rope_theta, 500000.0);
}

TEST(ModelConfig, RopeScalingErrors) {
  json root = golden_config("llama-tiny");
  root["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_ERROR_HAS(config_error(root),
                   "field 'rope_scaling.rope_type': unsupported rope scaling type 'yarn' (metainfer covers 'default' "
                   "and 'llama3')");
  root["rope_scaling"] = llama3_scaling();
  root["rope_scaling"].erase("low_freq_factor");
  EXPECT_ERROR_HAS(config_error(root),
                   "field 'rope_scaling.low_freq_factor': expected a positive number, got nothing (field missing)");
  root["rope_scaling"] = {{"factor", 8.0}};
  EXPECT_ERROR_HAS(config_error(root), "field 'rope_scaling.rope_type': expected a string naming the rope scaling type");
  root["rope_scaling"] = "llama3";
  EXPECT_ERROR_HAS(config_error(root), "field 'rope_scaling': expected an object or null, got \"llama3\"");
}

// ---- special tokens and the tokenizer-size check ----------------------------------------------------------------

// A checkpoint directory with the golden qwen3-tiny config (vocab 512) plus the given extra files.
class ConfigDir : public ::testing::Test {
 protected:
  void SetUp() override { write("config.json", golden_config("qwen3-tiny")); }
  void write(const std::string& name, const json& content) { test::write_bytes(dir_ / name, content.dump()); }
  // tokenizer.json with a model vocab of `model_tokens` ids and added tokens after it.
  json tokenizer(int model_tokens, const std::vector<std::pair<std::string, int>>& added) {
    json vocab = json::object();
    for (int i = 0; i < model_tokens; ++i) vocab["tok" + std::to_string(i)] = i;
    json added_tokens = json::array();
    for (const auto& [content, id] : added) added_tokens.push_back({{"id", id}, {"content", content}, {"special", true}});
    return {{"version", "1.0"},
            {"added_tokens", added_tokens},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"t o", "to k"})}}}};
  }
  ScratchDir dir_;
};

TEST_F(ConfigDir, EosFromAllThreeFilesAndBosPriority) {
  json config = golden_config("qwen3-tiny");
  config["eos_token_id"] = 3;
  config["bos_token_id"] = 1;
  write("config.json", config);
  write("generation_config.json", {{"bos_token_id", 2}, {"eos_token_id", {3, 4}}});
  write("tokenizer.json", tokenizer(500, {{"<|endoftext|>", 500}, {"<|im_end|>", 501}}));
  write("tokenizer_config.json", {{"eos_token", {{"content", "<|im_end|>"}, {"special", true}}},
                                  {"bos_token", "<|endoftext|>"}});
  ModelConfig c = load_model_config(dir_.path());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{3, 4, 501}));
  EXPECT_EQ(c.bos_token_id, 2);  // generation_config.json wins
  EXPECT_EQ(c.tokenizer_vocab_size, 502);
}

TEST_F(ConfigDir, EosTokenResolvedThroughAddedTokensDecoderOrModelVocab) {
  write("tokenizer_config.json",
        {{"eos_token", "<eos>"}, {"added_tokens_decoder", {{"77", {{"content", "<eos>"}, {"special", true}}}}}});
  EXPECT_EQ(load_model_config(dir_.path()).eos_token_ids, (std::vector<int>{77}));  // no tokenizer.json needed
  write("tokenizer_config.json", {{"eos_token", "tok42"}, {"bos_token", nullptr}});
  write("tokenizer.json", tokenizer(100, {}));
  ModelConfig c = load_model_config(dir_.path());
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{42}));
  EXPECT_FALSE(c.bos_token_id.has_value());
  write("tokenizer_config.json", {{"eos_token", "<missing>"}});
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }),
                   "tokenizer_config.json: field 'eos_token': token '<missing>' is not in tokenizer.json");
  write("tokenizer_config.json", {{"eos_token", 5}});
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }),
                   "field 'eos_token': expected a token string or {\"content\": string}, got 5");
}

TEST_F(ConfigDir, TokenizerLargerThanTheEmbeddingIsAnError) {
  write("tokenizer.json", tokenizer(500, {{"<|endoftext|>", 511}}));  // ids 0..511: exactly fits vocab 512
  EXPECT_EQ(load_model_config(dir_.path()).tokenizer_vocab_size, 512);
  write("tokenizer.json", tokenizer(300, {}));  // embedding padded past the tokenizer: fine
  EXPECT_EQ(load_model_config(dir_.path()).tokenizer_vocab_size, 300);
  write("tokenizer.json", tokenizer(500, {{"<|endoftext|>", 512}}));
  std::string message = error_of([&] { load_model_config(dir_.path()); });
  EXPECT_ERROR_HAS(message, "tokenizer.json: token '<|endoftext|>' has id 512, outside the model's vocabulary "
                            "(config.json vocab_size 512)");
  write("tokenizer.json", tokenizer(600, {}));
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }), "token 'tok599' has id 599");
  write("generation_config.json", {{"eos_token_id", 900}});
  write("tokenizer.json", tokenizer(10, {}));
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }),
                   "generation_config.json: eos_token_id 900 is outside the vocabulary");
}

TEST_F(ConfigDir, TokenizerJsonLayoutsAndErrors) {
  // Unigram: the vocab is [[piece, score], ...] and the id is the position.
  json unigram = {{"added_tokens", json::array({{{"id", 3}, {"content", "</s>"}}})},
                  {"model", {{"type", "Unigram"}, {"vocab", {{"<unk>", 0.0}, {"a", -1.5}, {"b", -2.0}, {"</s>", 0.0}}}}}};
  unigram["model"]["vocab"] = json::array({json::array({"<unk>", 0.0}), json::array({"a", -1.5}),
                                           json::array({"b", -2.0}), json::array({"</s>", 0.0})});
  write("tokenizer.json", unigram);
  write("tokenizer_config.json", {{"eos_token", "b"}});
  ModelConfig c = load_model_config(dir_.path());
  EXPECT_EQ(c.tokenizer_vocab_size, 4);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{2}));

  json bad_id = tokenizer(10, {});
  bad_id["added_tokens"] = json::array({{{"id", -4}, {"content", "<x>"}}});
  write("tokenizer.json", bad_id);
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }),
                   "tokenizer.json: added_tokens: token '?': expected a non-negative integer id, got -4");
  bad_id["added_tokens"] = json::array({{{"content", "<x>"}}});
  write("tokenizer.json", bad_id);
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }),
                   "field 'added_tokens': expected objects with 'id' and 'content'");
  json bad_vocab = tokenizer(3, {});
  bad_vocab["model"]["vocab"]["weird"] = "7";
  write("tokenizer.json", bad_vocab);
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }),
                   "model.vocab: token 'weird': expected a non-negative integer id, got \"7\"");
  test::write_bytes(dir_ / "tokenizer.json", "{\"model\": {\"vocab\": {\"a\": 1,");
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }), "tokenizer.json: not valid JSON");
  write("tokenizer.json", json::array({1, 2}));
  EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir_.path()); }), "tokenizer.json: expected a JSON object");
}

// The real Qwen3 and Llama 3 tokenizers (fetched by setup.sh into .cache/tokenizers) against their published
// vocab sizes (Qwen3: 151936 embedding rows, 151669 tokenizer ids; Llama 3: 128256 both).
TEST(ModelConfigRealTokenizers, Qwen3AndLlama3) {
  const std::filesystem::path tokenizers(METAINFER_TOKENIZERS);
  if (!std::filesystem::exists(tokenizers / "qwen3" / "tokenizer.json") ||
      !std::filesystem::exists(tokenizers / "llama3" / "tokenizer_config.json"))
    GTEST_SKIP() << "tokenizers not fetched (run setup.sh)";
  struct Case {
    const char* family;
    int vocab_size;
    int expected_ids;
    std::vector<int> expected_eos;
    std::optional<int> expected_bos;
  };
  // Qwen3: tokenizer_config eos "<|im_end|>" = 151645, bos null; Llama 3: bos <|begin_of_text|> 128000,
  // eos <|end_of_text|> 128001.
  for (const Case& c : {Case{"qwen3", 151936, 151669, {151645}, std::nullopt},
                        Case{"llama3", 128256, 128256, {128001}, 128000}}) {
    SCOPED_TRACE(c.family);
    ScratchDir dir;
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      if (std::filesystem::exists(tokenizers / c.family / file))
        std::filesystem::create_symlink(tokenizers / c.family / file, dir / file);
    }
    json config = golden_config("llama-tiny");
    config["vocab_size"] = c.vocab_size;
    test::write_bytes(dir / "config.json", config.dump());
    ModelConfig loaded = load_model_config(dir.path());
    EXPECT_EQ(loaded.tokenizer_vocab_size, c.expected_ids);
    EXPECT_EQ(loaded.eos_token_ids, c.expected_eos);
    EXPECT_EQ(loaded.bos_token_id, c.expected_bos);
    config["vocab_size"] = c.expected_ids - 1;
    test::write_bytes(dir / "config.json", config.dump());
    EXPECT_ERROR_HAS(error_of([&] { load_model_config(dir.path()); }), "outside the model's vocabulary");
  }
}

}  // namespace
}  // namespace mi::io
