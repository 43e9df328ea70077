// `metainfer skill export`: an Agent Skill whose front matter follows the format, whose role references match the
// CKB, and whose scripts run this binary.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

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

}  // namespace
