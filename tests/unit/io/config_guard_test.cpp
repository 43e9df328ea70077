// The guards the loader puts around a checkpoint: config values bounded before anything is sized by them, the
// generated engine's comparison of config.json with the one it was generated for, and a mapped weight file that is
// truncated under the reader (SIGBUS turned into a message and exit 1). The same cases through the real binaries
// are rows of tests/unit/toolkit_bad_input/bad_input_catalogue_test.cpp.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "io/model_config.h"
#include "io/safetensors.h"
#include "io/safetensors_writer.h"
#include "io_test_util.h"

namespace mi::io {
namespace {

using nlohmann::json;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

json small_config() {
  return json{{"architectures", {"Qwen3ForCausalLM"}}, {"model_type", "qwen3"}, {"vocab_size", 512},
              {"hidden_size", 128}, {"intermediate_size", 256}, {"num_hidden_layers", 3},
              {"num_attention_heads", 4}, {"num_key_value_heads", 2}, {"head_dim", 32},
              {"max_position_embeddings", 512}, {"hidden_act", "silu"}, {"rope_theta", 1000000.0},
              {"rms_norm_eps", 1e-6}, {"transformers_version", "4.57.0"}, {"eos_token_id", 2}};
}

TEST(ConfigBounds, EveryBoundIsCheckedBeforeTheTypedParse) {
  for (const ConfigBound& b : kConfigBounds) {
    if (std::string(b.field) == "original_max_position_embeddings" || std::string(b.field) == "moe_intermediate_size")
      continue;  // checked below / not parsed by the dense families
    json c = small_config();
    c[b.field] = b.max + 1;
    const std::string e = error_of([&] { parse_model_config(c, "config.json"); });
    EXPECT_NE(e.find(std::string("field '") + b.field + "': " + std::to_string(b.max + 1) + " exceeds metainfer's bound of " +
                     std::to_string(b.max)),
              std::string::npos)
        << e;
  }
  json c = small_config();
  c["num_hidden_layers"] = 1e9;  // a float literal: still bounded, and named
  EXPECT_NE(error_of([&] { check_config_bounds(c, "config.json"); }).find("field 'num_hidden_layers'"), std::string::npos);
  c = small_config();
  c["text_config"] = small_config();
  c["text_config"]["vocab_size"] = int64_t(1) << 40;
  EXPECT_NE(error_of([&] { check_config_bounds(c, "config.json"); }).find("field 'text_config.vocab_size'"), std::string::npos);
  c = small_config();
  c["rope_scaling"] = {{"rope_type", "llama3"}, {"original_max_position_embeddings", int64_t(1) << 30}};
  EXPECT_NE(error_of([&] { check_config_bounds(c, "config.json"); }).find("rope_scaling.original_max_position_embeddings"),
            std::string::npos);
  c = small_config();
  c["num_attention_heads"] = 4096;
  c["head_dim"] = 4096;
  EXPECT_NE(error_of([&] { check_config_bounds(c, "config.json"); }).find("num_attention_heads * head_dim = 16777216"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { check_config_bounds(small_config(), "config.json"); }), "(no error)");
  EXPECT_EQ(config_bound("num_hidden_layers"), 1024);
  EXPECT_FALSE(config_bound("rope_theta").has_value());
}

TEST(ConfigMatches, NamesTheFirstFieldThatDiffers) {
  const std::vector<std::string> ignored = {"transformers_version", "eos_token_id"};
  const json expected = computation_relevant_config(small_config(), ignored);
  EXPECT_FALSE(expected.contains("transformers_version"));
  json same = small_config();
  same["transformers_version"] = "5.0";  // ignorable
  same["eos_token_id"] = 7;
  same["sliding_window"] = nullptr;  // null is absent
  EXPECT_EQ(error_of([&] { check_config_matches(same, expected, ignored, "ck/config.json"); }), "(no error)");
  json rope_theta_as_int = small_config();
  rope_theta_as_int["rope_theta"] = 1000000;  // the same number
  EXPECT_EQ(error_of([&] { check_config_matches(rope_theta_as_int, expected, ignored, "ck/config.json"); }), "(no error)");

  json gelu = small_config();
  gelu["hidden_act"] = "gelu";
  EXPECT_NE(error_of([&] { check_config_matches(gelu, expected, ignored, "ck/config.json"); })
                .find("ck/config.json: field 'hidden_act': this engine was generated for \"silu\", the checkpoint has \"gelu\""),
            std::string::npos);
  json added = small_config();
  added["num_experts"] = 8;
  EXPECT_NE(error_of([&] { check_config_matches(added, expected, ignored, "c"); })
                .find("field 'num_experts': this engine was generated for nothing (field absent), the checkpoint has 8"),
            std::string::npos);
  json missing = small_config();
  missing.erase("hidden_act");
  EXPECT_NE(error_of([&] { check_config_matches(missing, expected, ignored, "c"); })
                .find("field 'hidden_act': this engine was generated for \"silu\", the checkpoint has nothing (field missing)"),
            std::string::npos);
  // Nested objects are compared field by field: a rope scaling factor is named by its path.
  json scaled = small_config();
  scaled["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0}};
  json other_factor = scaled;
  other_factor["rope_scaling"]["factor"] = 32.0;
  EXPECT_NE(error_of([&] {
              check_config_matches(other_factor, computation_relevant_config(scaled, ignored), ignored, "c");
            }).find("field 'rope_scaling.factor': this engine was generated for 8.0, the checkpoint has 32.0"),
            std::string::npos);
  // Sorted order: architectures is reported before anything else.
  json other = small_config();
  other["architectures"] = {"LlamaForCausalLM"};
  other["model_type"] = "llama";
  EXPECT_NE(error_of([&] { check_config_matches(other, expected, ignored, "c"); }).find("field 'architectures'"),
            std::string::npos);
}

// Runs `body` in a child process; returns its wait status and what it wrote on stderr.
std::pair<int, std::string> in_child(const std::function<void()>& body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    ::close(fds[0]);
    try {
      body();
    } catch (...) {
      ::_exit(96);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string err;
  char buffer[512];
  for (ssize_t n; (n = ::read(fds[0], buffer, sizeof buffer)) > 0;) err.append(buffer, std::size_t(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {status, err};
}

TEST(MappedFileSigbus, TruncatedWeightFileIsAMessageAndExitOne) {
  test::ScratchDir dir;
  const std::filesystem::path file = dir / "model.safetensors";
  std::vector<float> values(1 << 16, 1.5f);  // 256 KiB: many pages
  write_safetensors(file, {{"w", DType::F32, {int64_t(values.size())}, values.data(), values.size() * sizeof(float)}});
  const auto [status, err] = in_child([&] {
    install_mapped_file_sigbus_handler("test-engine");
    SafetensorsFile f = SafetensorsFile::open(file);
    const float* data = f.tensors().front().as<float>();
    if (::truncate(file.c_str(), 0) != 0) ::_exit(99);
    volatile float sum = 0;
    for (std::size_t i = 0; i < values.size(); i += 1024) sum = sum + data[i];  // pages beyond the end: SIGBUS
    ::_exit(98);  // not reached
  });
  ASSERT_TRUE(WIFEXITED(status)) << "died by signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0) << ": " << err;
  EXPECT_EQ(WEXITSTATUS(status), kExitMappedFileChanged);
  EXPECT_NE(err.find("test-engine: error: the checkpoint file " + file.string() +
                     " changed while the engine was reading it (SIGBUS at a mapped weight)"),
            std::string::npos)
      << err;
}

TEST(MappedFileSigbus, OtherSigbusKeepsTheDefaultAction) {
  const auto [status, err] = in_child([] {
    install_mapped_file_sigbus_handler("test-engine");
    ::raise(SIGBUS);
    ::_exit(97);
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS) << status << " " << err;
  EXPECT_EQ(err, "");
}

}  // namespace
}  // namespace mi::io
