// `metainfer tokenize` / `metainfer detokenize` run as subprocesses (the real binary, METAINFER_BINARY) against
// the reference tokenizers and golden cases.
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace {

namespace fs = std::filesystem;

struct RunResult {
  int exit_code = -1;
  std::string out, err;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream b;
  b << in.rdbuf();
  return b.str();
}

class CliTokenizer : public ::testing::Test {
 protected:
  void SetUp() override {
    tmp_ = fs::temp_directory_path() / ("mi_cli_tok_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(tmp_);
  }
  void TearDown() override { fs::remove_all(tmp_); }

  static std::string tokenizer_dir(const std::string& family) {
    const fs::path dir = fs::path(METAINFER_TOKENIZERS) / family;
    EXPECT_TRUE(fs::exists(dir / "tokenizer.json"))
        << "reference tokenizer missing: " << (dir / "tokenizer.json") << " — run ./setup.sh";
    return dir.string();
  }

  RunResult run(const std::vector<std::string>& args) {
    std::string cmd = shell_quote(METAINFER_BINARY);
    for (const auto& a : args) cmd.append(" ").append(shell_quote(a));
    const fs::path out = tmp_ / "stdout", err = tmp_ / "stderr";
    cmd.append(" >").append(shell_quote(out.string())).append(" 2>").append(shell_quote(err.string()));
    const int status = std::system(cmd.c_str());
    RunResult r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  fs::path write_file(const std::string& name, const std::string& bytes) {
    const fs::path p = tmp_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }

  static std::string join_ids(const std::vector<int32_t>& ids) {
    std::string s;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) s.push_back(',');
      s.append(std::to_string(ids[i]));
    }
    return s;
  }

  // Golden cases (tests/data/tokenizers/<family>.cases.jsonl) whose text contains `needle`.
  static nlohmann::json golden_case(const std::string& family, const std::string& needle) {
    std::ifstream in(fs::path(METAINFER_TEST_DATA) / "tokenizers" / (family + ".cases.jsonl"));
    std::string line;
    while (std::getline(in, line)) {
      auto j = nlohmann::json::parse(line);
      if (j["text"].get<std::string>().find(needle) != std::string::npos) return j;
    }
    ADD_FAILURE() << "no golden case containing " << needle;
    return nlohmann::json::object();
  }

  fs::path tmp_;
};

TEST_F(CliTokenizer, TokenizeTextPrintsCommaSeparatedIds) {
  const RunResult r = run({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--text", "Hello, world!"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "9707,11,1879,0\n");
}

TEST_F(CliTokenizer, TokenizeJsonHasIdsAndTokens) {
  const RunResult r = run({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--text", "Hello, world!", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["ids"], nlohmann::json({9707, 11, 1879, 0}));
  EXPECT_EQ(j["tokens"], nlohmann::json({"Hello", ",", "Ġworld", "!"}));
}

TEST_F(CliTokenizer, TokenizeFileMatchesGoldenIdsForBothFamilies) {
  for (const std::string family : {"qwen3", "llama3"}) {
    for (const std::string needle : {"line one\n", "<|im_start|>"}) {
      const auto c = golden_case(family, needle);
      const fs::path f = write_file("input.txt", c["text"].get<std::string>());
      const RunResult r = run({"tokenize", "--tokenizer", tokenizer_dir(family), "--file", f.string()});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, join_ids(c["ids"].get<std::vector<int32_t>>()) + "\n") << family << ": " << needle;
      const RunResult s =
          run({"tokenize", "--tokenizer", tokenizer_dir(family), "--file", f.string(), "--add-special"});
      EXPECT_EQ(s.out, join_ids(c["ids_with_special"].get<std::vector<int32_t>>()) + "\n") << family;
    }
  }
}

TEST_F(CliTokenizer, DetokenizePrintsExactTextWithoutTrailingNewline) {
  for (const std::string family : {"qwen3", "llama3"}) {
    for (const std::string needle : {"line one\n", "Emoji"}) {
      const auto c = golden_case(family, needle);
      const RunResult r = run({"detokenize", "--tokenizer", tokenizer_dir(family), "--ids",
                               join_ids(c["ids"].get<std::vector<int32_t>>())});
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_EQ(r.out, c["decoded"].get<std::string>()) << family << ": " << needle;
    }
  }
}

TEST_F(CliTokenizer, DetokenizeSkipSpecial) {
  // <|im_start|>user\nhi<|im_end|>
  const RunResult keep = run({"detokenize", "--tokenizer", tokenizer_dir("qwen3"), "--ids", "151644,872,198,6023,151645"});
  EXPECT_EQ(keep.exit_code, 0) << keep.err;
  EXPECT_EQ(keep.out, "<|im_start|>user\nhi<|im_end|>");
  const RunResult skip = run({"detokenize", "--tokenizer", tokenizer_dir("qwen3"), "--ids", "151644, 872, 198, 6023, 151645",
                              "--skip-special"});
  EXPECT_EQ(skip.exit_code, 0) << skip.err;
  EXPECT_EQ(skip.out, "user\nhi");
}

TEST_F(CliTokenizer, DetokenizeEmptyIdListPrintsNothing) {
  const RunResult r = run({"detokenize", "--tokenizer", tokenizer_dir("qwen3"), "--ids", ""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST_F(CliTokenizer, UnknownIdExitsTwoNamingTheId) {
  const RunResult r = run({"detokenize", "--tokenizer", tokenizer_dir("qwen3"), "--ids", "9707,987654321"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("987654321"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
  const RunResult neg = run({"detokenize", "--tokenizer", tokenizer_dir("llama3"), "--ids", "-5"});
  EXPECT_EQ(neg.exit_code, 2);
  EXPECT_NE(neg.err.find("-5"), std::string::npos) << neg.err;
}

TEST_F(CliTokenizer, MalformedIdsExitTwo) {
  const RunResult r = run({"detokenize", "--tokenizer", tokenizer_dir("qwen3"), "--ids", "1,x2,3"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("x2"), std::string::npos) << r.err;
  EXPECT_EQ(run({"detokenize", "--tokenizer", tokenizer_dir("qwen3"), "--ids", "1,,2"}).exit_code, 2);
  EXPECT_EQ(run({"detokenize", "--tokenizer", tokenizer_dir("qwen3"), "--ids", "99999999999"}).exit_code, 2);
}

TEST_F(CliTokenizer, MissingTokenizerExitsTwo) {
  const RunResult r = run({"tokenize", "--tokenizer", (tmp_ / "nowhere").string(), "--text", "hi"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("tokenizer.json"), std::string::npos) << r.err;
}

TEST_F(CliTokenizer, TextSourceMustBeExactlyOne) {
  const fs::path f = write_file("a.txt", "hi");
  EXPECT_EQ(run({"tokenize", "--tokenizer", tokenizer_dir("qwen3")}).exit_code, 2);
  EXPECT_EQ(run({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--text", "a", "--file", f.string()}).exit_code, 2);
  const RunResult missing = run({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--file", (tmp_ / "nope").string()});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("nope"), std::string::npos) << missing.err;
}

TEST_F(CliTokenizer, InvalidUtf8InputExitsTwo) {
  const fs::path f = write_file("bad.txt", std::string("ok \xC3\x28 bad"));
  const RunResult r = run({"tokenize", "--tokenizer", tokenizer_dir("qwen3"), "--file", f.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("UTF-8"), std::string::npos) << r.err;
}

TEST_F(CliTokenizer, HelpDocumentsOutputFormat) {
  const RunResult r = run({"detokenize", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("NO trailing newline"), std::string::npos) << r.out;
}

}  // namespace
