// `metainfer skill export`: an Agent Skill whose front matter follows the format, whose role references match the
// CKB, and whose scripts run this binary.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>

#include "../toolkit_support.h"
#include "agents/agent_role.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(AgentSkill, ExportWritesAValidSkillWhoseScriptsCallMetainfer) {
  mi_test::TempDir dir("agents-skill");
  const auto r = mi_test::metainfer({"skill", "export", dir.path().string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const fs::path root = dir / "metainfer";
  const std::string md = slurp(root / "SKILL.md");
  // Front matter: between the first two '---' lines; name matches the directory, lowercase/digits/hyphens, at most
  // 64 characters; a description of at most 1024 characters.
  std::smatch m;
  ASSERT_TRUE(std::regex_search(md, m, std::regex("^---\n([\\s\\S]*?)\n---\n"))) << md.substr(0, 300);
  const std::string front = m[1];
  std::smatch name, desc;
  ASSERT_TRUE(std::regex_search(front, name, std::regex("(^|\n)name: ([^\n]*)")));
  EXPECT_EQ(name[2].str(), root.filename().string());
  EXPECT_TRUE(std::regex_match(name[2].str(), std::regex("[a-z0-9]+(-[a-z0-9]+)*")));
  EXPECT_LE(name[2].str().size(), 64u);
  ASSERT_TRUE(std::regex_search(front, desc, std::regex("(^|\n)description: ([^\n]*)")));
  EXPECT_GT(desc[2].str().size(), 50u);
  EXPECT_LE(desc[2].str().size(), 1024u);
  EXPECT_NE(desc[2].str().find("Use when"), std::string::npos);

  const fs::path roles = fs::path(METAINFER_SOURCE_DIR) / "ckb/roles";
  for (const auto& id : mi::agents::required_role_ids()) {
    const std::string ref = slurp(root / "references/roles" / (id + ".md"));
    const auto role = mi::agents::find_role(roles, id);
    EXPECT_NE(ref.find(role.prompt.substr(0, 40)), std::string::npos) << id;
    for (const auto& t : role.tools) EXPECT_NE(ref.find("`" + t + "`"), std::string::npos) << id << " " << t;
    EXPECT_NE(md.find("references/roles/" + id + ".md"), std::string::npos) << id;
  }

  // The scripts run this binary: lint through ckb-check.sh, and protect/check-protected on a run directory.
  const auto lint = mi::process::run({(root / "scripts/ckb-check.sh").string()});
  EXPECT_EQ(lint.exit_code, 0) << lint.out << lint.err;
  EXPECT_NE(lint.out.find("0 error(s)"), std::string::npos) << lint.out;
  const fs::path run = dir / "run";
  mi_test::write_text(run / "tests/contract.txt", "x\n");
  EXPECT_EQ(mi::process::run({(root / "scripts/protect.sh").string(), run.string()}).exit_code, 0);
  EXPECT_EQ(mi::process::run({(root / "scripts/check-protected.sh").string(), run.string()}).exit_code, 0);
  mi_test::write_text(run / "tests/contract.txt", "weakened\n");
  const auto tampered = mi::process::run({(root / "scripts/check-protected.sh").string(), run.string()});
  EXPECT_EQ(tampered.exit_code, 1);
  EXPECT_NE(tampered.err.find("modified tests/contract.txt"), std::string::npos) << tampered.err;

  // A second export into the same place is refused rather than mixing two skills.
  EXPECT_EQ(mi_test::metainfer({"skill", "export", dir.path().string()}).exit_code, 2);
}

// Every exported script runs this binary, and consolidate.sh takes the path evolve's merge takes: a delta in the
// knowledge layers is merged, tagged and logged; one that reaches outside them, or adds a lint error, is refused
// and nothing is written.
TEST(AgentSkill, EveryScriptRunsAndConsolidateMergesOnlyAKnowledgeDelta) {
  mi_test::TempDir dir("agents-skill-scripts");
  ASSERT_EQ(mi_test::metainfer({"skill", "export", dir.path().string()}).exit_code, 0);
  const fs::path scripts = dir / "metainfer/scripts";
  auto run = [&](const std::string& script, std::vector<std::string> args) {
    args.insert(args.begin(), (scripts / script).string());
    return mi::process::run(args, {.timeout_s = 300});
  };
  std::set<std::string> exercised;
  auto ran = [&](const std::string& script, std::vector<std::string> args) {
    exercised.insert(script);
    return run(script, std::move(args));
  };
  const std::string model = mi_test::golden("qwen3-tiny").string();
  const auto coverage = ran("coverage.sh", {"--model", model, "--platform", "x86-64-avx2"});
  EXPECT_EQ(coverage.exit_code, 0) << coverage.out << coverage.err;
  const fs::path engine = dir / "engine";
  const auto generate = ran("generate.sh", {"--model", model, "--platform", "x86-64-avx2", "-o", engine.string(), "--no-verify"});
  EXPECT_EQ(generate.exit_code, 0) << generate.out << generate.err;
  EXPECT_TRUE(fs::exists(engine / "MANIFEST.json"));
  const auto verify = ran("verify.sh", {(dir / "nothing").string()});  // no engine there: bad input, named
  EXPECT_EQ(verify.exit_code, 2) << verify.out << verify.err;
  EXPECT_NE(verify.err.find("nothing"), std::string::npos) << verify.err;
  EXPECT_EQ(ran("ckb-check.sh", {}).exit_code, 0);
  EXPECT_EQ(ran("protect.sh", {engine.string()}).exit_code, 0);
  EXPECT_EQ(ran("check-protected.sh", {engine.string()}).exit_code, 0);
  const auto agents = ran("agents.sh", {"protect", "--run-dir", engine.string(), "--check"});
  EXPECT_EQ(agents.exit_code, 0) << agents.out << agents.err;

  const fs::path ckb = dir / "ckb", delta = dir / "delta", evidence = dir / "regen-verification.json";
  fs::copy(fs::path(METAINFER_SOURCE_DIR) / "ckb", ckb, fs::copy_options::recursive);
  mi_test::write_text(evidence, "{\"format\": \"metainfer-verification/1\", \"state\": \"PASSED:L1_stage:basic_execution\"}\n");
  mi_test::write_text(delta / "experience/skill_rule.md", "# A rule learned through the skill.\n");
  const std::vector<std::string> common = {"--delta", delta.string(), "--round", "evo-007", "--evidence", evidence.string(), "--ckb", ckb.string()};
  // Outside the knowledge layers: refused, nothing merged.
  mi_test::write_text(delta / "roles/implementer.toml", "write_paths = [\"**\"]\n");
  const auto refused = ran("consolidate.sh", common);
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_EQ(mi_test::last_json_line(refused.out)["state"], "REFUSED");
  EXPECT_NE(refused.err.find("roles/implementer.toml"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(ckb / "experience/skill_rule.md"));
  fs::remove_all(delta / "roles");
  // A contract that breaks lint: refused too.
  mi_test::write_text(delta / "contracts/broken.toml", "id = \"broken\"\n");
  const auto lint = ran("consolidate.sh", common);
  EXPECT_EQ(lint.exit_code, 1) << lint.out << lint.err;
  EXPECT_FALSE(mi_test::last_json_line(lint.out)["lint_errors"].empty()) << lint.out;
  EXPECT_FALSE(fs::exists(ckb / "contracts/broken.toml"));
  fs::remove_all(delta / "contracts");
  // A knowledge delta: merged, tagged with the round and the evidence, logged.
  const auto merged = ran("consolidate.sh", common);
  EXPECT_EQ(merged.exit_code, 0) << merged.out << merged.err;
  EXPECT_EQ(mi_test::last_json_line(merged.out)["merged"], nlohmann::json::array({"experience/skill_rule.md"}));
  EXPECT_EQ(slurp(ckb / "experience/skill_rule.md"),
            "<!-- evolved in evo-007; evidence: " + evidence.string() + " -->\n# A rule learned through the skill.\n");
  EXPECT_NE(slurp(ckb / "evolution/log.toml").find("id = \"evo-007\""), std::string::npos);
  // Bad input: evidence that does not exist.
  std::vector<std::string> missing = common;
  missing[5] = (dir / "no-such-report.json").string();
  EXPECT_EQ(run("consolidate.sh", missing).exit_code, 2);
  // Bad input: a report of failed gates, and a file that is no verification report, are not evidence.
  const fs::path failed = dir / "failed-verification.json", other = dir / "other.json";
  mi_test::write_text(failed, "{\"format\": \"metainfer-verification/1\", \"state\": \"FAILED:L2_regression\"}\n");
  mi_test::write_text(other, "{\"state\": \"PASS_VERIFIED\"}\n");
  for (const fs::path& bad : {failed, other}) {
    std::vector<std::string> args = common;
    args[5] = bad.string();
    const auto r = run("consolidate.sh", args);
    EXPECT_EQ(r.exit_code, 2) << bad << r.out << r.err;
    EXPECT_NE(r.err.find(bad.string()), std::string::npos) << r.err;
  }

  // Every script the skill ships was run above.
  std::set<std::string> shipped;
  for (const auto& e : fs::directory_iterator(scripts)) shipped.insert(e.path().filename().string());
  EXPECT_EQ(exercised, shipped);
}

}  // namespace
