// `metainfer ckb check` on the real CKB (must be clean) and on copies with planted defects (must fail naming the
// file and field).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "../toolkit_support.h"
#include "ckb/ckb.h"
#include "ckb/lint.h"

namespace {
namespace fs = std::filesystem;
using mi_test::metainfer;

fs::path real_ckb() { return fs::path(METAINFER_SOURCE_DIR) / "ckb"; }

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A copy of the CKB with `file` edited by replacing `from` with `to` (which must occur).
fs::path planted(const mi_test::TempDir& dir, const std::string& file, const std::string& from, const std::string& to) {
  const fs::path copy = dir / "ckb";
  fs::copy(real_ckb(), copy, fs::copy_options::recursive);
  std::string text = read(copy / file);
  const auto pos = text.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  text.replace(pos, from.size(), to);
  std::ofstream(copy / file) << text;
  return copy;
}

TEST(CkbCheck, TheRepositoryCkbIsClean) {
  const auto r = metainfer({"ckb", "check", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("errors"), 0) << j.at("findings").dump(1);
  const mi::ckb::Ckb ckb = mi::ckb::load(real_ckb());
  EXPECT_GE(ckb.contracts.size(), 15u);
  int failure_modes = 0;
  for (const auto& e : ckb.experience) failure_modes += e.kind == "failure_mode";
  EXPECT_EQ(failure_modes, 9) << "the nine failure modes of the paper's Table 13";
  for (const char* c : {"weight_loading", "tokenizer", "chat_template", "embedding", "rmsnorm", "rotary_embedding",
                        "gqa_attention", "swiglu_mlp", "lm_head", "sampler", "kv_cache", "scheduler", "server"})
    EXPECT_NE(ckb.find_contract(c), nullptr) << c;
}

TEST(CkbCheck, PlantedDanglingReferenceFailsNamingFileAndField) {
  mi_test::TempDir dir("ckb-dangling");
  const fs::path ckb = planted(dir, "contracts/lm_head.toml", "depends_on = [\"kernels\", \"rmsnorm\", \"embedding\"]",
                               "depends_on = [\"kernels\", \"rmsnorm\", \"embeddings_v2\"]");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("contracts/lm_head.toml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("depends_on[2]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("embeddings_v2"), std::string::npos) << r.out;
}

TEST(CkbCheck, MissingEnforcingTestFails) {
  mi_test::TempDir dir("ckb-test");
  const fs::path ckb = planted(dir, "contracts/rmsnorm.toml", "name = \"RmsNorm*\"", "name = \"NoSuchSuite.NoSuchTest\"");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("contracts/rmsnorm.toml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("NoSuchSuite.NoSuchTest"), std::string::npos) << r.out;
}

TEST(CkbCheck, UnmappedWeightAndUnknownShapeTermFail) {
  mi_test::TempDir dir("ckb-weight");
  const fs::path ckb = planted(dir, "families/qwen3.toml", "contract = \"swiglu_mlp\"\n[[weights]]\nname = \"model.layers.{L}.mlp.up_proj.weight\"\nshape = [\"intermediate_size\", \"hidden_size\"]",
                               "contract = \"swiglu_mlp\"\n[[weights]]\nname = \"model.layers.{L}.mlp.up_proj.weight\"\nshape = [\"intermediate_sizes\", \"hidden_size\"]\ncontract = \"moe_mlp\"\n[[weights]]\nname = \"x\"\nshape = [\"hidden_size\"]");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("families/qwen3.toml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("intermediate_sizes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("moe_mlp"), std::string::npos) << r.out;
}

TEST(CkbCheck, ExperienceWithoutGuardingTestFails) {
  mi_test::TempDir dir("ckb-exp");
  const fs::path ckb = planted(dir, "experience/failure_modes.toml", "{ file = \"tests/unit/runtime/\", name = \"KvCache*\" }",
                               "{ file = \"tests/unit/runtime/gone_test.cpp\", name = \"KvCache*\" }");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("BUG-KVLEN"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gone_test.cpp"), std::string::npos) << r.out;
}

TEST(CkbCheck, RoleSeparationIsChecked) {
  mi_test::TempDir dir("ckb-roles");
  const fs::path ckb = planted(dir, "agents/roles.toml", "may_not = [\"run gates\", \"edit tests or test contracts\", \"declare PASS or FAIL\", \"read foreign framework source\"]",
                               "may_not = [\"run gates\"]");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("role implementer"), std::string::npos) << r.out;
}

TEST(CkbCheck, MalformedTomlIsAnErrorNamingTheFile) {
  mi_test::TempDir dir("ckb-syntax");
  const fs::path ckb = planted(dir, "platforms/x86-64-avx2.toml", "priority = 10", "priority = = 10");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("x86-64-avx2.toml"), std::string::npos) << r.err;
}

}  // namespace
