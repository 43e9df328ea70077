// The LLM flags' input checks, shared by `agents`, `generate --backend agents` and `evolve`: a count or limit that is
// not positive, and a hosted API without its key, exit 2 naming the flag or the variable, before anything is laid down
// (no run directory, no work directory, no round).
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "agents_test_support.h"
#include "process/subprocess.h"

namespace {

namespace fs = std::filesystem;
using agents_test::write;

// metainfer with the providers' environment cleared (an empty value counts as unset), so the defaults apply.
mi::process::RunResult metainfer_without_keys(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {METAINFER_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  return mi::process::run(argv, {.env = {{"OPENAI_API_KEY", ""}, {"OPENAI_BASE_URL", ""}, {"ANTHROPIC_API_KEY", ""}, {"ANTHROPIC_BASE_URL", ""}},
                                 .timeout_s = 60});
}

TEST(AgentLlmFlags, AHostedApiWithoutAKeyFailsBeforeAnythingIsLaidDown) {
  mi_test::TempDir dir("llm-flags-key");
  write(dir / "contracts/gates/target.sh", "exit 0\n");
  const std::string model = mi_test::golden("qwen3-tiny").string();
  const auto e = metainfer_without_keys({"evolve", "--model", model, "--contracts", (dir / "contracts").string(), "--work-dir",
                                         (dir / "work").string(), "--llm-model", "gpt-x"});
  EXPECT_EQ(e.exit_code, 2) << e.out << e.err;
  EXPECT_NE(e.err.find("OPENAI_API_KEY"), std::string::npos) << e.err;
  EXPECT_NE(e.err.find("https://api.openai.com/v1"), std::string::npos) << e.err;
  EXPECT_FALSE(fs::exists(dir / "work"));

  const auto a = metainfer_without_keys({"agents", "evolve", "--target", "t", "--contracts", (dir / "contracts").string(), "--work-dir",
                                         (dir / "work2").string(), "--llm", "anthropic", "--llm-model", "claude-x"});
  EXPECT_EQ(a.exit_code, 2) << a.out << a.err;
  EXPECT_NE(a.err.find("ANTHROPIC_API_KEY"), std::string::npos) << a.err;
  EXPECT_FALSE(fs::exists(dir / "work2"));

  const auto g = metainfer_without_keys({"generate", "--model", model, "-o", (dir / "engine").string(), "--backend", "agents",
                                         "--llm-model", "gpt-x", "--llm-key-env", "MI_TEST_UNSET_KEY"});
  EXPECT_EQ(g.exit_code, 2) << g.out << g.err;
  EXPECT_NE(g.err.find("MI_TEST_UNSET_KEY"), std::string::npos) << g.err;
  EXPECT_FALSE(fs::exists(dir / "engine"));

  // A local server needs no key: the same command gets past the check (the CKB covers this model, so it stops there).
  const auto local = metainfer_without_keys({"evolve", "--model", model, "--contracts", (dir / "contracts").string(), "--work-dir",
                                             (dir / "work3").string(), "--llm-model", "m", "--llm-url", "http://127.0.0.1:9/v1"});
  EXPECT_EQ(local.exit_code, 0) << local.out << local.err;
  EXPECT_EQ(mi_test::last_json_line(local.out)["state"], "COVERED");
}

TEST(AgentLlmFlags, CountsAndLimitsMustBePositive) {
  mi_test::TempDir dir("llm-flags-numbers");
  fs::create_directories(dir / "run");
  write(dir / "contracts/gates/target.sh", "exit 0\n");
  const std::string local = "http://127.0.0.1:9/v1";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {"--max-turns", {"agents", "converse", "--role", "orchestrator", "--run-dir", (dir / "run").string(), "--task", "t",
                       "--llm-url", local, "--llm-model", "m", "--max-turns", "0"}},
      {"--max-tokens", {"agents", "converse", "--role", "orchestrator", "--run-dir", (dir / "run").string(), "--task", "t",
                        "--llm-url", local, "--llm-model", "m", "--max-tokens", "0"}},
      {"--llm-timeout-s", {"agents", "converse", "--role", "orchestrator", "--run-dir", (dir / "run").string(), "--task", "t",
                           "--llm-url", local, "--llm-model", "m", "--llm-timeout-s", "-1"}},
      {"--llm-attempts", {"agents", "converse", "--role", "orchestrator", "--run-dir", (dir / "run").string(), "--task", "t",
                          "--llm-url", local, "--llm-model", "m", "--llm-attempts", "0"}},
      {"--max-repair-rounds", {"evolve", "--model", mi_test::golden("qwen3-tiny").string(), "--contracts", (dir / "contracts").string(),
                               "--work-dir", (dir / "w").string(), "--llm-url", local, "--llm-model", "m", "--max-repair-rounds", "-1"}},
      {"--max-rounds", {"evolve", "--model", mi_test::golden("qwen3-tiny").string(), "--contracts", (dir / "contracts").string(),
                        "--work-dir", (dir / "w").string(), "--llm-url", local, "--llm-model", "m", "--max-rounds", "0"}},
      {"--gate-timeout-s", {"agents", "stage", "--run-dir", (dir / "run").string(), "--stage", "s", "--objective", "o",
                            "--llm-url", local, "--llm-model", "m", "--gate-timeout-s", "-5"}},
      {"--max-repair-rounds", {"generate", "--model", mi_test::golden("qwen3-tiny").string(), "-o", (dir / "engine").string(), "--backend",
                               "agents", "--llm-url", local, "--llm-model", "m", "--max-repair-rounds", "-1"}},
  };
  for (const auto& [flag, args] : cases) {
    SCOPED_TRACE(flag + " in " + args[0]);
    const auto r = mi_test::metainfer(args, 60);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(flag + ": must be a"), std::string::npos) << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "w"));
  EXPECT_FALSE(fs::exists(dir / "engine"));
  EXPECT_FALSE(fs::exists(dir / "run/transcripts"));
}

}  // namespace
