// `metainfer generate --tune`: the platform's kernel parameters are timed on this machine for the model's shapes
// and the fastest that passed its scalar-level check is kept (by median round; the default unless beaten in 4 of 5)
// - in the constraints (the engine's CMakeLists defines it, and the L0 regeneration reproduces it), in MANIFEST.json
// with every timing, and appended to the CKB's experience layer. Constraints naming a parameter the platform does not declare, or a value it does not list, are
// refused with the field named.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "../toolkit_support.h"
#include "ckb/ckb.h"
#include "common/error.h"
#include "tune/kernel_tuner.h"

namespace {
namespace fs = std::filesystem;
using mi_test::golden;
using mi_test::metainfer;
using nlohmann::json;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(Tune, Avx512ParametersAreTimedCheckedAndBuiltIn) {
  const mi::ckb::Ckb repo_ckb = mi::ckb::load(mi::ckb::default_ckb_dir());
  const char* id = "x86-64-avx512";
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512dq"))
    GTEST_SKIP() << "this CPU cannot run " << id;
  ASSERT_FALSE(repo_ckb.find_platform(id)->tuning.empty()) << id << " declares kernel parameters";
  mi_test::TempDir dir("tune512");
  fs::copy(mi::ckb::default_ckb_dir(), dir / "ckb", fs::copy_options::recursive);
  const fs::path experience_file = dir / "ckb/experience/kernel_tuning.toml";
  const std::string before = fs::exists(experience_file) ? read(experience_file) : "";
  const auto r = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--platform", id, "--threads", "2",
                            "--no-verify", "--tune", "--ckb", (dir / "ckb").string(), "-o", (dir / "e").string()},
                           1800);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json manifest = json::parse(read(dir / "e/MANIFEST.json"));
  const std::string cmake = read(dir / "e/CMakeLists.txt");
  const std::string experience = read(experience_file).substr(before.size());  // what this run appended
  int batch_only = 0;
  for (const auto& param : repo_ckb.find_platform(id)->tuning) {
    SCOPED_TRACE(param.parameter);
    const json& t = manifest.at("tuning").at(param.parameter);
    if (param.op == "batch") {
      // This engine decodes one sequence at a time (max_batch 1): its decode never runs blocks of min_tokens or more
      // (only a 4- to 8-token prefill would), so the parameter they read (MI_TUNE_BATCH_PREFETCH) is not timed and
      // keeps the kernel's default.
      ++batch_only;
      EXPECT_TRUE(t.at("chosen").is_null()) << t.dump(1);
      EXPECT_NE(t.value("skipped", "").find("at most 1 at once (max_batch)"), std::string::npos) << t.dump(1);
      EXPECT_FALSE(manifest.at("constraints").at("tuning").contains(param.parameter));
      EXPECT_EQ(experience.find("parameter = \"" + param.parameter + "\""), std::string::npos) << experience;
      continue;
    }
    ASSERT_FALSE(t.at("chosen").is_null()) << t.dump(1);
    const int chosen = t.at("chosen").get<int>();
    EXPECT_TRUE(std::count(param.values.begin(), param.values.end(), chosen));
    for (int v : param.values) {
      const json& res = t.at("values").at(std::to_string(v));
      EXPECT_TRUE(res.at("ok").get<bool>()) << res.dump();
      EXPECT_GT(res.at("seconds").get<double>(), 0);
      if (!t.contains("kept_default"))
        EXPECT_LE(t.at("values").at(std::to_string(chosen)).at("seconds").get<double>(), res.at("seconds").get<double>())
            << "the chosen value is the fastest";
      // seconds is the median of the interleaved rounds (one fast minute of a shared host does not decide); the
      // best round is kept beside it.
      std::vector<double> runs = res.at("runs").get<std::vector<double>>();
      ASSERT_EQ(runs.size(), 5u) << res.dump();
      std::sort(runs.begin(), runs.end());
      EXPECT_DOUBLE_EQ(res.at("seconds").get<double>(), runs[2]) << res.dump();
      EXPECT_DOUBLE_EQ(res.at("best_seconds").get<double>(), runs[0]) << res.dump();
    }
    // The choice is choose_value's on the recorded rounds, with this parameter's default.
    std::map<int, std::vector<double>> runs;
    for (int v : param.values) runs[v] = t.at("values").at(std::to_string(v)).at("runs").get<std::vector<double>>();
    const auto expected = mi::tune::choose_value(runs, param.default_value);
    EXPECT_EQ(expected.value, chosen) << t.dump(1);
    EXPECT_EQ(t.contains("kept_default"), !expected.why.empty()) << t.dump(1);
    // A streamed (decode) pass reads a whole decode step of this small model: its 3 layers and the LM head once.
    if (param.op != "matmul") EXPECT_EQ(t.at("layers_per_pass").get<int>(), 3) << t.dump(1);
    EXPECT_EQ(manifest.at("constraints").at("tuning").at(param.parameter), chosen);
    EXPECT_NE(cmake.find(param.parameter + "=" + std::to_string(chosen)), std::string::npos) << cmake;
    EXPECT_NE(experience.find("parameter = \"" + param.parameter + "\""), std::string::npos) << experience;
    EXPECT_NE(experience.find("statistic = \"median\""), std::string::npos) << experience;
  }
  EXPECT_EQ(batch_only, 1) << "MI_TUNE_BATCH_PREFETCH";
  // The CKB still lints with the measurements appended, and the tuned engine's sources are what the generator
  // emits for its constraints (L0 regeneration carries [tuning]).
  EXPECT_EQ(metainfer({"ckb", "check", "--ckb", (dir / "ckb").string()}).exit_code, 0);
  const auto v = metainfer({"verify", (dir / "e").string(), "--only", "L0_sources", "--json"}, 600);
  EXPECT_NE(v.out.find("\"L0_sources\""), std::string::npos) << v.out << v.err;
  EXPECT_EQ(v.out.find("differs from what the generator emits"), std::string::npos) << v.out;
}

// An int8 engine's decode kernels are the same dot forms and read the row-stream and prefetch parameters: the
// timing program quantises its weights as the engine does and times those (the platform's `dtypes`); the bf16-only
// parameters are skipped, and the manifest says why. The measurements are recorded with dtype = "int8".
TEST(Tune, Int8EnginesTimeTheParametersTheirKernelsRead) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl") ||
      !__builtin_cpu_supports("avx512dq"))
    GTEST_SKIP() << "this CPU cannot run x86-64-avx512";
  // avx512bf16 also declares bf16-only parameters (MI_TUNE_BF16_*), which an int8 engine must skip.
  const char* id = __builtin_cpu_supports("avx512bf16") ? "x86-64-avx512bf16" : "x86-64-avx512";
  const mi::ckb::Ckb repo_ckb = mi::ckb::load(mi::ckb::default_ckb_dir());
  mi_test::TempDir dir("tuneint8");
  fs::copy(mi::ckb::default_ckb_dir(), dir / "ckb", fs::copy_options::recursive);
  const fs::path experience = dir / "ckb/experience/kernel_tuning.toml";
  const std::string before = fs::exists(experience) ? read(experience) : "";
  const auto r = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--platform", id, "--threads", "2",
                            "--max-batch", "8", "--dtype", "int8", "--no-verify", "--tune", "--ckb", (dir / "ckb").string(), "-o",
                            (dir / "e").string()},
                           1800);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json manifest = json::parse(read(dir / "e/MANIFEST.json"));
  const std::string recorded = read(experience).substr(before.size());
  int timed = 0;
  for (const auto& param : repo_ckb.find_platform(id)->tuning) {
    SCOPED_TRACE(param.parameter);
    const json& t = manifest.at("tuning").at(param.parameter);
    if (std::count(param.dtypes.begin(), param.dtypes.end(), "int8")) {
      ++timed;
      ASSERT_FALSE(t.at("chosen").is_null()) << t.dump(1);
      EXPECT_EQ(t.at("dtype"), "int8");
      // The program streamed int8 weights: one byte per weight and a 4-byte scale per row (bf16 would be 2 per
      // weight), for every matrix of the pass: layers_per_pass layers of the recorded layer shapes, then the head.
      const auto shapes = t.at("shapes").get<std::vector<std::pair<int, int>>>();
      ASSERT_GE(shapes.size(), 2u);
      double layer = 0;
      for (std::size_t i = 0; i + 1 < shapes.size(); ++i) layer += double(shapes[i].first) * (shapes[i].second + 4);
      const double head = double(shapes.back().first) * (shapes.back().second + 4);
      // decode: one token, then the batch; batch: the 8 tokens alone (MI_TUNE_BATCH_PREFETCH).
      const int passes = param.op == "decode" && t.at("tokens").get<int>() > 1 ? 2 : 1;
      // matvec parameters (MI_TUNE_DOT_PREFETCH among them: blocks of 1 to 3 tokens) at one token, the others at the
      // engine's batch.
      EXPECT_EQ(t.at("tokens").get<int>(), param.op == "matvec" ? 1 : 8) << t.dump(1);
      const double expected = passes * (t.at("layers_per_pass").get<int>() * layer + head);
      for (int v : param.values) {
        const json& res = t.at("values").at(std::to_string(v));
        EXPECT_TRUE(res.at("ok").get<bool>()) << t.dump(1);
        EXPECT_DOUBLE_EQ(res.at("bytes").get<double>(), expected) << t.dump(1);
      }
      EXPECT_EQ(manifest.at("constraints").at("tuning").at(param.parameter), t.at("chosen"));
      EXPECT_NE(recorded.find("parameter = \"" + param.parameter + "\""), std::string::npos) << recorded;
    } else {
      EXPECT_TRUE(t.contains("skipped")) << t.dump();
      EXPECT_TRUE(t.at("chosen").is_null());
      EXPECT_FALSE(manifest.at("constraints").at("tuning").contains(param.parameter));
      EXPECT_EQ(recorded.find("parameter = \"" + param.parameter + "\""), std::string::npos) << recorded;
    }
  }
  EXPECT_EQ(timed, 4) << "MI_TUNE_MATVEC_ROWS, MI_TUNE_ROW_STREAMS, MI_TUNE_DOT_PREFETCH and MI_TUNE_BATCH_PREFETCH";
  EXPECT_NE(recorded.find("dtype = \"int8\""), std::string::npos) << recorded;
  EXPECT_EQ(recorded.find("dtype = \"bf16\""), std::string::npos) << recorded;
}

// A decode pass in a decode step's proportions: whole layers up to the cap beside the head (at least one, at most the
// model's), then the head once; element bytes decide what fits. The median of the rounds decides between values, and
// the default stays unless another value beats it in most rounds.
TEST(Tune, DecodePassesKeepAStepsProportionsAndValuesAreJudgedByTheirMedian) {
  mi::tune::ModelShapes m;
  m.layer = {{4096, 1024}, {1024, 2048}, {6144, 1024}, {1024, 3072}};  // 15.7 M weights a layer
  m.head = std::pair<int, int>{151936, 1024};                          // 155.6 M
  m.layers = 28;
  const double layer = 4096.0 * 1024 + 1024.0 * 2048 + 6144.0 * 1024 + 1024.0 * 3072, head = 151936.0 * 1024;
  const auto count = [](const mi::tune::StreamedPass& p, std::pair<int, int> s) {
    return std::count(p.shapes.begin(), p.shapes.end(), s);
  };
  auto p = mi::tune::streamed_shapes(m, 1e12, 2.0);  // everything fits: the whole model
  EXPECT_EQ(p.layers, 28);
  EXPECT_EQ(p.shapes.size(), 28u * 4 + 1);
  EXPECT_EQ(p.shapes.back(), *m.head);
  EXPECT_EQ(count(p, *m.head), 1);
  p = mi::tune::streamed_shapes(m, 2.0 * (head + 10.5 * layer), 2.0);  // bf16: 10 whole layers fit beside the head
  EXPECT_EQ(p.layers, 10);
  EXPECT_EQ(count(p, {4096, 1024}), 10);
  p = mi::tune::streamed_shapes(m, head + 10.5 * layer, 1.0);  // int8: one byte a weight, so half the cap holds as much
  EXPECT_EQ(p.layers, 10);
  p = mi::tune::streamed_shapes(m, head + 10.5 * layer, 2.0);  // where bf16 fits only the head and one layer
  EXPECT_EQ(p.layers, 1);
  p = mi::tune::streamed_shapes(m, 1.0, 2.0);  // the head alone exceeds the cap: still one layer and the head
  EXPECT_EQ(p.layers, 1);
  EXPECT_EQ(p.shapes.size(), 5u);
  m.head.reset();  // no LM head (a prefill pass, or a config without vocab_size)
  p = mi::tune::streamed_shapes(m, 2.0 * 3.5 * layer, 2.0);
  EXPECT_EQ(p.layers, 3);
  EXPECT_EQ(p.shapes.size(), 12u);

  // The lowest median wins, but a value other than the default must beat it in 4 of 5 rounds.
  using Runs = std::map<int, std::vector<double>>;
  auto c = mi::tune::choose_value(Runs{{4, {17.6, 19.3, 18.8, 19.0, 18.6}}, {8, {19.5, 18.3, 18.2, 19.3, 18.4}}}, 4);
  EXPECT_EQ(c.value, 4) << "8's median is lower, but it was faster in only 3 of 5 rounds";
  EXPECT_NE(c.why.find("3 of 5"), std::string::npos) << c.why;
  c = mi::tune::choose_value(Runs{{0, {43.8, 52.4, 49.1, 48.7, 50.8}}, {1, {60.7, 48.2, 51.4, 51.7, 52.0}}}, 1);
  EXPECT_EQ(c.value, 0) << "faster than the default in 4 of 5 rounds";
  EXPECT_TRUE(c.why.empty());
  c = mi::tune::choose_value(Runs{{0, {5.0, 5.0, 5.0}}, {1, {4.0, 4.0, 4.0}}}, 1);
  EXPECT_EQ(c.value, 1) << "the default with the lowest median";
  c = mi::tune::choose_value(Runs{{0, {5.0, 6.0}}, {8, {4.0, 4.5}}}, 4);
  EXPECT_EQ(c.value, 8) << "the default did not pass: the lowest median";
  EXPECT_FALSE(mi::tune::choose_value(Runs{}, 4).value);
  // Three values: the lowest median (2) beat the default in 3 of 5 only; 1 beat it in 5 of 5 and is kept.
  c = mi::tune::choose_value(Runs{{0, {10, 10, 10, 10, 10}}, {1, {9, 9, 9, 9, 9}}, {2, {5, 5, 5, 11, 11}}}, 0);
  EXPECT_EQ(c.value, 1);
  EXPECT_NE(c.why.find("2 had the lowest median"), std::string::npos) << c.why;

  EXPECT_DOUBLE_EQ(mi::tune::median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(mi::tune::median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(mi::tune::median({0.013, 0.016, 0.0134, 0.0147, 0.0141}), 0.0141) << "not the best round";
  EXPECT_THROW(mi::tune::median({}), mi::Error);
}

TEST(Tune, ConstraintsNamingAnUndeclaredParameterOrValueAreRefused) {
  mi_test::TempDir dir("tunebad");
  const fs::path model = golden("qwen3-tiny");
  mi_test::write_text(dir / "a.toml", "[model]\npath = \"" + model.string() +
                                          "\"\n[platform]\nname = \"x86-64-avx512\"\n[tuning]\nMI_TUNE_NOT_A_PARAMETER = 4\n");
  auto r = metainfer({"plan", (dir / "a.toml").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("tuning.MI_TUNE_NOT_A_PARAMETER"), std::string::npos) << r.err;
  mi_test::write_text(dir / "b.toml", "[model]\npath = \"" + model.string() +
                                          "\"\n[platform]\nname = \"x86-64-avx512\"\n[tuning]\nMI_TUNE_MATVEC_ROWS = 3\n");
  r = metainfer({"plan", (dir / "b.toml").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("expected one of 4, 8"), std::string::npos) << r.err;
  mi_test::write_text(dir / "c.toml", "[model]\npath = \"" + model.string() + "\"\n[tuning]\nlowercase = 4\n");
  r = metainfer({"plan", (dir / "c.toml").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("tuning.lowercase"), std::string::npos) << r.err;
  // 0 is a value like any other where the platform declares it (MI_TUNE_ROW_STREAMS: 0 = adjacent rows), and is
  // refused where it does not.
  mi_test::write_text(dir / "d.toml", "[model]\npath = \"" + model.string() +
                                          "\"\n[platform]\nname = \"x86-64-avx512\"\n[tuning]\nMI_TUNE_ROW_STREAMS = 0\n");
  r = metainfer({"plan", (dir / "d.toml").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  mi_test::write_text(dir / "e.toml", "[model]\npath = \"" + model.string() +
                                          "\"\n[platform]\nname = \"x86-64-avx512\"\n[tuning]\nMI_TUNE_MATVEC_ROWS = 0\n");
  r = metainfer({"plan", (dir / "e.toml").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("expected one of 4, 8"), std::string::npos) << r.err;
}

}  // namespace
