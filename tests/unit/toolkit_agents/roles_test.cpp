// The LLM roles as data (ckb/roles/*.toml) and their lint: the repository's roles are clean, and a role file that
// grants an unknown tool, reaches a protected path, or pretends to be the verifier fails `ckb check`.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "../toolkit_support.h"
#include "agents/agent_role.h"
#include "agents/tool_catalog.h"
#include "ckb/ckb.h"
#include "ckb/lint.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;

const fs::path kCkb = fs::path(METAINFER_SOURCE_DIR) / "ckb";

std::vector<mi::ckb::Finding> role_errors(const fs::path& ckb_dir) {
  std::vector<mi::ckb::Finding> out;
  for (const auto& f : mi::ckb::lint(mi::ckb::load(ckb_dir), METAINFER_SOURCE_DIR))
    if (f.severity == "error" && f.file.find("roles") != std::string::npos) out.push_back(f);
  return out;
}

std::string describe(const std::vector<mi::ckb::Finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += f.file + " " + f.field + ": " + f.message + "\n";
  return s;
}

// A copy of the CKB with `text` replaced in roles/<file>.
fs::path planted(const mi_test::TempDir& dir, const std::string& file, const std::string& from, const std::string& to) {
  const fs::path copy = dir / "ckb";
  fs::copy(kCkb, copy, fs::copy_options::recursive);
  const fs::path p = copy / "roles" / file;
  std::ifstream in(p);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  text.replace(at, from.size(), to);
  std::ofstream(p) << text;
  return copy;
}

TEST(AgentRoles, RepositoryRolesLoadAndLintClean) {
  const auto roles = load_roles(kCkb / "roles");
  EXPECT_EQ(roles.size(), required_role_ids().size() + 1);  // + the verifier's code row
  for (const auto& id : required_role_ids()) {
    const AgentRoleSpec r = find_role(kCkb / "roles", id);
    EXPECT_FALSE(r.prompt.empty()) << id;
    EXPECT_NO_THROW(tool_specs(r.tools)) << id;
  }
  // Only the implementer runs commands (builds, its stage's tests); the reviewer cannot edit.
  for (const auto& r : roles) EXPECT_EQ(r.has_tool("run_command"), r.id == "implementer") << r.id;
  EXPECT_FALSE(find_role(kCkb / "roles", "spec_reviewer").has_tool("edit_file"));
  EXPECT_FALSE(find_role(kCkb / "roles", "explorer").has_tool("run_command"));
  EXPECT_TRUE(role_errors(kCkb).empty()) << describe(role_errors(kCkb));
}

// One role table (the paper's Table 7): every row in ckb/roles/, the verifier's row code that no LLM can play, and
// only it free to declare PASS or FAIL.
TEST(AgentRoles, TheVerifierRowIsCodeAndNoLlmCanPlayIt) {
  const auto roles = load_roles(kCkb / "roles");
  int code_rows = 0;
  for (const auto& r : roles) {
    EXPECT_FALSE(r.responsibility.empty()) << r.id;
    const bool may_declare = std::find(r.may_not.begin(), r.may_not.end(), "declare PASS or FAIL") == r.may_not.end();
    EXPECT_EQ(may_declare, r.id == "verifier") << r.id;
    if (!r.is_llm()) {
      ++code_rows;
      EXPECT_EQ(r.id, "verifier");
      EXPECT_EQ(r.runs, "metainfer verify");
      EXPECT_TRUE(r.prompt.empty() && r.tools.empty());
    }
  }
  EXPECT_EQ(code_rows, 1);
  try {
    find_role(kCkb / "roles", "verifier");
    ADD_FAILURE() << "an LLM conversation could play the verifier";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not an LLM role"), std::string::npos) << e.what();
  }
  // A second code row (a judge no gate runner backs), and a code row with a prompt, fail.
  mi_test::TempDir dir("roles-code");
  const fs::path copy = planted(dir, "explorer.toml", "", "");
  std::ofstream(copy / "roles/judge.toml") << "id = \"judge\"\ntitle = \"Judge\"\nkind = \"code\"\nruns = \"true\"\n"
                                              "responsibility = \"Declares PASS.\"\nmay_not = []\n";
  const std::string all = describe(role_errors(copy));
  EXPECT_NE(all.find("only the verifier is code"), std::string::npos) << all;
  EXPECT_NE(all.find("only the verifier may declare PASS or FAIL"), std::string::npos) << all;
  mi_test::TempDir dir2("roles-code-prompt");
  const fs::path copy2 = planted(dir2, "verifier.toml", "runs = \"metainfer verify\"", "runs = \"metainfer verify\"\nprompt = \"Say PASS.\"");
  const std::string all2 = describe(role_errors(copy2));
  EXPECT_NE(all2.find("kind \"code\" has none"), std::string::npos) << all2;
}

// A prompt that names a run-directory file the workflow never lays down sends the model looking for it. Each role's
// prompt may name only what exists when that role runs (its task names the rest, such as the review report's path).
TEST(AgentRoles, PromptsNameOnlyFilesTheWorkflowProduces) {
  const std::map<std::string, std::set<std::string>> allowed = {
      {"orchestrator", {"strategy/strategy.md"}},
      {"explorer", {"inputs/", "exploration/notes.md"}},
      {"implementer", {"src/", "reports/", "tests/", "notes/implementer/questions.md"}},
      {"spec_reviewer", {"src/", "review/"}},
      {"consolidator", {"exploration/notes.md", "ckb_delta/", "ckb_delta/contracts/", "framework/", "families/", "platforms/",
                        "signals/", "experience/"}},
      {"failure_analyst", {"reports/", "failure/analysis.md"}},
      {"experiment_summariser", {"experiment/summary.md"}},
  };
  // Run-directory paths: a word, a slash, and what follows up to a space or punctuation that ends a sentence.
  const std::regex path(R"(([A-Za-z_]+/(?:[A-Za-z0-9_<>./-]*[A-Za-z0-9_<>/])?))");
  for (const AgentRoleSpec& role : load_roles(kCkb / "roles")) {
    if (!role.is_llm()) continue;
    SCOPED_TRACE(role.id);
    ASSERT_TRUE(allowed.count(role.id));
    for (std::sregex_iterator it(role.prompt.begin(), role.prompt.end(), path), end; it != end; ++it) {
      const std::string p = (*it)[1];
      if (p.rfind("ckb/", 0) == 0 || p.rfind("@ckb", 0) == 0 || role.prompt.compare(it->position(1) - 1, 1, "@") == 0) continue;
      EXPECT_TRUE(allowed.at(role.id).count(p)) << "prompt names " << p;
    }
  }
  // The wording the workflow relies on: the reviewer writes where its task says; the consolidator runs before any
  // implementation exists.
  EXPECT_NE(find_role(kCkb / "roles", "spec_reviewer").prompt.find("the path given in the task"), std::string::npos);
  EXPECT_EQ(find_role(kCkb / "roles", "consolidator").prompt.find("implementation that passed"), std::string::npos);
}

TEST(AgentRoles, UnknownToolFailsLint) {
  mi_test::TempDir dir("roles-unknown-tool");
  const auto errors = role_errors(planted(dir, "implementer.toml", "\"run_command\"]", "\"run_command\", \"browse_web\"]"));
  ASSERT_EQ(errors.size(), 1u) << describe(errors);
  EXPECT_EQ(errors[0].field, "tools[6]");
  EXPECT_NE(errors[0].message.find("browse_web"), std::string::npos);
}

TEST(AgentRoles, WritePathReachingTestContractsFailsLint) {
  mi_test::TempDir dir("roles-protected");
  const auto errors = role_errors(planted(dir, "implementer.toml", "write_paths = [\"src/**\"", "write_paths = [\"**/*.cpp\""));
  ASSERT_FALSE(errors.empty());
  EXPECT_EQ(errors[0].field, "write_paths[0]");
  EXPECT_NE(errors[0].message.find("tests/"), std::string::npos) << describe(errors);
}

TEST(AgentRoles, AVerifierRoleAndAMissingRoleFailLint) {
  mi_test::TempDir dir("roles-verifier");
  const fs::path copy = planted(dir, "failure_analyst.toml", "id = \"failure_analyst\"", "id = \"verifier\"");
  fs::rename(copy / "roles/failure_analyst.toml", copy / "roles/verifier.toml");
  const std::string all = describe(role_errors(copy));
  EXPECT_NE(all.find("gate runner"), std::string::npos) << all;
  EXPECT_NE(all.find("missing role file failure_analyst.toml"), std::string::npos) << all;
}

TEST(AgentRoles, MalformedRoleFileNamesTheField) {
  mi_test::TempDir dir("roles-malformed");
  const auto errors = role_errors(planted(dir, "explorer.toml", "tools = [", "tools = 3\nx = ["));
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors[0].message.find("explorer.toml"), std::string::npos) << describe(errors);
}

}  // namespace
