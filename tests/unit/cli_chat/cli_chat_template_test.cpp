// `metainfer chat-template`: prints the rendered prompt byte for byte (every golden chat case of both model
// families, through files as a user would pass them), and exits 2 with the message on template errors
// (raise_exception), unreadable or invalid JSON and bad flags.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

struct RunResult {
  int status = -1;
  std::string out;
  std::string err;
};

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

class CliChatTemplate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mi_cli_chat_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  RunResult run(const std::string& args) {
    const fs::path out = dir_ / "stdout";
    const fs::path err = dir_ / "stderr";
    const std::string command = std::string("'") + METAINFER_BINARY + "' chat-template " + args + " >'" +
                                out.string() + "' 2>'" + err.string() + "'";
    const int raw = std::system(command.c_str());
    RunResult result;
    result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    result.out = read_file(out);
    result.err = read_file(err);
    return result;
  }

  fs::path dir_;
};

TEST_F(CliChatTemplate, RendersEveryGoldenCaseExactly) {
  for (const std::string family : {"qwen3", "llama3"}) {
    const fs::path tokenizer = fs::path(METAINFER_TOKENIZERS) / family;
    ASSERT_TRUE(fs::exists(tokenizer / "tokenizer_config.json")) << tokenizer << " missing: run setup.sh";
    std::ifstream cases(fs::path(METAINFER_TEST_DATA) / "tokenizers" / (family + ".chat.jsonl"));
    ASSERT_TRUE(cases) << family << ".chat.jsonl missing";
    std::string line;
    int count = 0;
    while (std::getline(cases, line)) {
      if (line.empty()) continue;
      const ordered_json c = ordered_json::parse(line);
      SCOPED_TRACE(family + ": " + line.substr(0, 200));
      write_file(dir_ / "messages.json", c["messages"].dump());
      std::string args = "--tokenizer '" + tokenizer.string() + "' --messages '" + (dir_ / "messages.json").string() + "'";
      if (c.value("add_generation_prompt", false)) args += " --add-generation-prompt";
      if (c.contains("tools")) {
        write_file(dir_ / "tools.json", c["tools"].dump());
        args += " --tools '" + (dir_ / "tools.json").string() + "'";
      }
      if (c.contains("enable_thinking")) args += std::string(" --enable-thinking ") + (c["enable_thinking"].get<bool>() ? "true" : "false");
      const RunResult r = run(args);
      if (c.contains("error")) {
        EXPECT_EQ(r.status, 2);
        EXPECT_NE(r.err.find(c["error"].get<std::string>()), std::string::npos) << r.err;
      } else {
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.out, c["rendered"].get<std::string>());
      }
      ++count;
    }
    EXPECT_GT(count, 0);
  }
}

TEST_F(CliChatTemplate, TemplateErrorsExitTwoWithTheMessage) {
  const fs::path tokenizer = dir_ / "tok";
  fs::create_directories(tokenizer);
  write_file(tokenizer / "tokenizer_config.json",
             R"({"chat_template": "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ m.content }}{% endfor %}"})");
  write_file(dir_ / "ok.json", R"([{"role": "user", "content": "fine"}])");
  write_file(dir_ / "bad.json", R"([{"role": "system", "content": "x"}])");
  const RunResult ok = run("--tokenizer '" + tokenizer.string() + "' --messages '" + (dir_ / "ok.json").string() + "'");
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_EQ(ok.out, "fine");
  const RunResult bad = run("--tokenizer '" + tokenizer.string() + "' --messages '" + (dir_ / "bad.json").string() + "'");
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.err.find("TemplateError: System role not supported"), std::string::npos) << bad.err;
  EXPECT_TRUE(bad.out.empty());
}

TEST_F(CliChatTemplate, BadInputsExitTwo) {
  const std::string tokenizer = (fs::path(METAINFER_TOKENIZERS) / "qwen3").string();
  write_file(dir_ / "broken.json", R"([{"role": "user", "content": )");
  RunResult r = run("--tokenizer '" + tokenizer + "' --messages '" + (dir_ / "broken.json").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
  write_file(dir_ / "object.json", R"({"role": "user"})");
  r = run("--tokenizer '" + tokenizer + "' --messages '" + (dir_ / "object.json").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("expected a JSON array"), std::string::npos) << r.err;
  r = run("--tokenizer '" + tokenizer + "' --messages '" + (dir_ / "missing.json").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("cannot open file"), std::string::npos) << r.err;
  write_file(dir_ / "ok.json", R"([{"role": "user", "content": "x"}])");
  r = run("--tokenizer '" + tokenizer + "' --messages '" + (dir_ / "ok.json").string() + "' --enable-thinking maybe");
  EXPECT_EQ(r.status, 2);
  r = run("--tokenizer '" + (dir_ / "nowhere").string() + "' --messages '" + (dir_ / "ok.json").string() + "'");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("tokenizer_config.json: cannot open file"), std::string::npos) << r.err;
}

}  // namespace
