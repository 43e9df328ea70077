// `metainfer ckb check` on the real CKB (must be clean) and on copies with planted defects (must fail naming the
// file and field).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "../toolkit_support.h"
#include "ckb/ckb.h"
#include "ckb/family_weights.h"
#include "ckb/lint.h"
#include "generator/forward_steps.h"
#include "io/safetensors.h"
#include "kernels/row_streams.h"

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
  std::set<std::string> failure_modes;
  for (const auto& e : ckb.experience)
    if (e.kind == "failure_mode") failure_modes.insert(e.id);
  for (const char* id : {"CONFIG-001", "ENGINE-001", "BUG-004-1", "BUG-004-2", "BUG-004-3", "BUG-KVLEN", "BUG-005-1",
                         "BUG-005-2", "BUG-005-3"})
    EXPECT_TRUE(failure_modes.count(id)) << "the nine failure modes of the paper's Table 13: " << id;
  for (const char* id : {"HYBRID-001", "HYBRID-002", "HYBRID-003"})
    EXPECT_TRUE(failure_modes.count(id)) << "hybrid-family failure mode " << id;
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

// A tuning parameter's `dtypes` names weight dtypes the timing program runs (bf16, int8) that the platform has.
TEST(CkbCheck, TuningDtypesTheTimingProgramCannotRunFail) {
  mi_test::TempDir dir("ckb-tune-dtypes");
  const fs::path ckb = planted(dir, "platforms/x86-64-avx512.toml", "dtypes = [\"bf16\", \"int8\"]",
                               "dtypes = [\"bf16\", \"f16\"]");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("platforms/x86-64-avx512.toml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tuning[0].dtypes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'f16'"), std::string::npos) << r.out;
}

// min_tokens is honoured only by a batch-alone timing (op = "batch"), and a decode block has at most 8 tokens.
TEST(CkbCheck, TuningMinTokensOutsideABatchTimingFail) {
  struct Case {
    std::string from, to, message;
  };
  const std::vector<Case> cases = {{"op = \"batch\"\nmin_tokens = 4", "op = \"decode\"\nmin_tokens = 4", "only op = \"batch\""},
                                   {"min_tokens = 4", "min_tokens = 9", "expected 1..8"},
                                   {"min_tokens = 4", "min_tokens = 0", "expected 1..8"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.to);
    mi_test::TempDir dir("ckb-tune-min-tokens");
    const fs::path ckb = planted(dir, "platforms/x86-64-avx512.toml", c.from, c.to);
    const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
    EXPECT_EQ(r.exit_code, 1) << r.out;
    EXPECT_NE(r.out.find("platforms/x86-64-avx512.toml"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(".min_tokens"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << r.out;
  }
}

// The block size from which the kernels read MI_TUNE_BATCH_PREFETCH is the min_tokens every platform declares for it,
// so the tuner skips it exactly for the engines whose decode never runs such blocks.
TEST(CkbCheck, BatchPrefetchMinTokensIsTheKernelsThreshold) {
  const mi::ckb::Ckb ckb = mi::ckb::load(real_ckb());
  int declared = 0;
  for (const auto& platform : ckb.platforms)
    for (const auto& t : platform.tuning)
      if (t.parameter == "MI_TUNE_BATCH_PREFETCH") {
        ++declared;
        EXPECT_EQ(t.op, "batch") << platform.id;
        EXPECT_EQ(t.min_tokens, mi::kernels::kBatchPrefetchTokens) << platform.id;
      }
  EXPECT_EQ(declared, 3) << "x86-64-avx512, x86-64-avx512bf16 and x86-64-amx prefetch in their dot forms";
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

TEST(CkbCheck, LayerKindMistakesFail) {
  mi_test::TempDir dir("ckb-layer-kind");
  const fs::path ckb = planted(dir, "families/qwen3_5.toml",
                               "forward = [\"post_attention_norm\", \"swiglu_mlp\", \"residual_add\"]",
                               "forward = [\"post_attention_norm\", \"swiglu_mlpp\", \"moe_mlp\", \"residual_add\"]");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("families/qwen3_5.toml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown component step 'swiglu_mlpp'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'moe_mlp', which the family does not require"), std::string::npos) << r.out;

  mi_test::TempDir dir2("ckb-weight-kind");
  const fs::path ckb2 = planted(dir2, "families/qwen3_5.toml", "kind = \"gated_deltanet\"\nnorm = \"w\"",
                                "kind = \"gdn\"\nnorm = \"2w\"");
  const auto r2 = metainfer({"ckb", "check", "--ckb", ckb2.string()});
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_NE(r2.out.find("undeclared layer kind 'gdn'"), std::string::npos) << r2.out;
  EXPECT_NE(r2.out.find("\"2w\""), std::string::npos) << r2.out;

  mi_test::TempDir dir3("ckb-layer-type");
  const fs::path ckb3 = planted(dir3, "families/qwen3_next.toml", "layer_type = \"full_attention\"",
                                "layer_type = \"linear_attention\"");
  const auto r3 = metainfer({"ckb", "check", "--ckb", ckb3.string()});
  EXPECT_EQ(r3.exit_code, 1);
  EXPECT_NE(r3.out.find("\"full_attention\" has 0 mixer layer kinds"), std::string::npos) << r3.out;
  EXPECT_NE(r3.out.find("\"linear_attention\" has 2 mixer layer kinds"), std::string::npos) << r3.out;
}

// [forward].fast_f32_inputs (experience NUM-FAST-001/002) names steps the family runs whose matmul inputs the
// generator then keeps f32 in fast numerics: a step the family does not run fails lint, one that rounds no matmul
// input fails generation, both naming the step.
TEST(CkbCheck, FastF32InputsNameARoundingStepTheFamilyRuns) {
  mi_test::TempDir dir("ckb-fast-f32-unknown");
  const fs::path ckb = planted(dir, "families/llama.toml", "fast_f32_inputs = [\"qkv_proj\"]", "fast_f32_inputs = [\"qg_proj\"]");
  const auto r = metainfer({"ckb", "check", "--ckb", ckb.string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("families/llama.toml"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("forward.fast_f32_inputs[0]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("step 'qg_proj' is not in the family's forward steps"), std::string::npos) << r.out;

  mi_test::TempDir dir2("ckb-fast-f32-rope");
  const fs::path ckb2 =
      planted(dir2, "families/llama.toml", "fast_f32_inputs = [\"qkv_proj\"]", "fast_f32_inputs = [\"qkv_proj\", \"rope\"]");
  ASSERT_EQ(metainfer({"ckb", "check", "--ckb", ckb2.string()}).exit_code, 0);
  const auto g = metainfer({"generate", "--ckb", ckb2.string(), "--model", mi_test::golden("llama-tiny").string(), "--no-verify",
                            "-o", (dir2 / "engine").string()});
  EXPECT_NE(g.exit_code, 0);
  EXPECT_NE(g.err.find("fast_f32_inputs names step 'rope', which rounds no matmul input"), std::string::npos) << g.out << g.err;

  // A family running qkv_proj without qk_norm must keep that input f32 (NUM-FAST-001): dropping the entry fails lint.
  mi_test::TempDir dir3("ckb-fast-f32-missing");
  const fs::path ckb3 = planted(dir3, "families/llama.toml", "fast_f32_inputs = [\"qkv_proj\"]", "");
  const auto r3 = metainfer({"ckb", "check", "--ckb", ckb3.string()});
  EXPECT_EQ(r3.exit_code, 1);
  EXPECT_NE(r3.out.find("runs qkv_proj without qk_norm"), std::string::npos) << r3.out;
}

// The effect itself, read from the generated model.h of the real CKB: the listed steps take the precise (f32) matmul
// input in every numerics, the steps not listed still round in fast numerics.
TEST(CkbFamilies, GeneratedEnginesKeepTheListedMatmulInputsF32) {
  auto block = [](const std::string& text, const std::string& step) {
    const auto begin = text.find("    // " + step + "\n");
    EXPECT_NE(begin, std::string::npos) << step;
    if (begin == std::string::npos) return std::string();
    return text.substr(begin, text.find("\n    // ", begin + 1) - begin);
  };
  const std::string precise_in = "<K, mi::model::Numerics::precise>(";
  mi_test::TempDir dir("fast-f32-emitted");
  for (const char* c : {"llama-tiny", "qwen3_5-tiny"}) {
    SCOPED_TRACE(c);
    const fs::path out = dir / c;
    ASSERT_EQ(metainfer({"generate", "--model", mi_test::golden(c).string(), "--numerics", "fast", "--no-verify", "-o", out.string()}).exit_code, 0);
    const std::string model = read(out / "src" / "model.h");
    const bool llama = std::string(c) == "llama-tiny";
    const std::string kept = block(model, llama ? "qkv_proj" : "swiglu_mlp");
    EXPECT_NE(kept.find(precise_in), std::string::npos) << kept;
    EXPECT_EQ(kept.find("<K, N>"), std::string::npos) << kept;
    EXPECT_EQ(kept.find("rounded<N>"), std::string::npos) << kept;
    const std::string rounded = block(model, llama ? "o_proj" : "qg_proj");
    EXPECT_NE(rounded.find("matmul_input<K, N>("), std::string::npos) << rounded;
    if (llama) {
      EXPECT_NE(block(model, "swiglu_mlp").find("swiglu_mlp<K, N>("), std::string::npos);
    }
  }
}

// The step vocabulary is knowledge: each contract declares the forward steps its components implement (`steps`) and
// lint, coverage and the generator key on it. Every step the generator's table can write is declared by exactly one
// contract, and every step a family uses is one the generator can write; a step declared twice, or a family step no
// contract declares, fails lint naming it.
TEST(CkbSteps, GeneratorStepTableAndContractStepsAgree) {
  const mi::ckb::Ckb ckb = mi::ckb::load(real_ckb());
  for (const auto& step : mi::generator::forward_steps())
    EXPECT_FALSE(mi::ckb::step_contract(ckb, step.id).empty()) << "generator step " << step.id << " is declared by no contract";
  for (const auto& f : ckb.families) {
    for (const auto& step : f.forward_steps()) EXPECT_NE(mi::generator::find_forward_step(step), nullptr) << f.id << ": " << step;
  }
  mi_test::TempDir dir("ckb-step-twice");
  const fs::path twice = planted(dir, "contracts/gated_attention.toml", "steps = [\"qg_proj\"", "steps = [\"rope\", \"qg_proj\"");
  const auto r = metainfer({"ckb", "check", "--ckb", twice.string()});
  EXPECT_EQ(r.exit_code, 1);
  // Reported on whichever of the two files loads second.
  EXPECT_NE(r.out.find("field 'steps[0]': step 'rope' is declared by contract '"), std::string::npos) << r.out;
  mi_test::TempDir dir2("ckb-step-undeclared");
  const fs::path undeclared = planted(dir2, "contracts/rotary_embedding.toml", "steps = [\"rope\", \"partial_rope\"]",
                                      "steps = [\"rope\"]");
  const auto r2 = metainfer({"ckb", "check", "--ckb", undeclared.string()});
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_NE(r2.out.find("unknown component step 'partial_rope' (no contract declares it in `steps`)"), std::string::npos) << r2.out;
}

// The hybrid family entries declare every tensor of the golden checkpoints with its shape (layer kinds place the
// per-kind tensors on their layers, {E} runs over the experts), and the norm convention of every norm weight
// (failure mode HYBRID-001): (1 + w) for the layer, final and q/k norms, w for the DeltaNet gated norm.
TEST(CkbFamilies, HybridNormConventionsAreDeclared) {
  const mi::ckb::Ckb ckb = mi::ckb::load(real_ckb());
  const std::vector<std::pair<std::string, std::string>> cases = {{"qwen3_5", "qwen3_5-tiny"},
                                                                   {"qwen3_next", "qwen3_next-tiny"}};
  for (const auto& [id, golden_case] : cases) {
    const mi::ckb::Family* f = ckb.find_family(id);
    ASSERT_NE(f, nullptr) << id;
    std::ifstream in(mi_test::golden(golden_case) / "config.json");
    const auto config = nlohmann::json::parse(in);
    const auto store = mi::io::WeightStore::open(mi_test::golden(golden_case));
    const auto expected = mi::ckb::expected_weights(*f, config, false);
    std::set<std::string> names;
    for (const auto& e : expected) {
      names.insert(e.name);
      const auto* t = store.find(e.name);
      ASSERT_NE(t, nullptr) << id << ": " << e.name;
      EXPECT_EQ(t->shape, e.shape) << id << ": " << e.name;
    }
    EXPECT_EQ(names.size(), store.names().size()) << id << ": every tensor declared once, no other";
    for (const auto& w : f->weights) {
      const bool norm = w.name.find("norm") != std::string::npos;
      EXPECT_EQ(!w.norm.empty(), norm) << id << ": " << w.name;
      if (!norm) continue;
      const bool gated = w.name.find("linear_attn.norm") != std::string::npos;
      EXPECT_EQ(w.norm, gated ? "w" : "1+w") << id << ": " << w.name;
    }
  }
  // The dense families leave norm unset (y = w * x / rms): the (1+w) knowledge is the hybrids' alone.
  for (const auto& w : ckb.find_family("qwen3")->weights) EXPECT_TRUE(w.norm.empty() || w.norm == "w") << w.name;
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
  const fs::path ckb = planted(dir, "roles/implementer.toml", "may_not = [\"run gates\", \"edit tests or test contracts\", \"declare PASS or FAIL\", \"read foreign framework source\"]",
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
