// 8-bit weights end to end (ckb/contracts/int8_weights.toml): an int8 engine of a tiny golden checkpoint is
// generated, built and verified (PASS_VERIFIED_ORACLE: judged against the oracle on the contract-quantised weights,
// and within the int8 accuracy bound of the unquantised model); an engine whose quantisation differs from the
// contract (one scale per tensor instead of per row) fails acceptance; fast mode is refused.
#include <gtest/gtest.h>

#include "../toolkit_support.h"
#include "generator/manifest.h"

namespace {
namespace fs = std::filesystem;
using mi_test::golden;
using mi_test::metainfer;
using nlohmann::json;

class Int8Engine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new mi_test::TempDir("int8");
    const auto r = metainfer({"generate", "--model", golden("qwen3-tiny").string(), "--dtype", "int8", "--threads", "2",
                              "--no-verify", "--json", "-o", (*dir_ / "base").string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static fs::path copy(const std::string& name) {
    const fs::path to = *dir_ / name;
    fs::remove_all(to);
    fs::create_directories(to);
    for (const auto& e : fs::directory_iterator(*dir_ / "base"))
      if (e.path().filename() != "build" && e.path().filename() != "reports")
        fs::copy(e.path(), to / e.path().filename(), fs::copy_options::recursive);
    return to;
  }
  static json verify(const fs::path& engine, const std::vector<std::string>& extra) {
    std::vector<std::string> args = {"verify", engine.string(), "--threads", "2", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return mi_test::last_json_line(metainfer(args, 1800).out);
  }
  static mi_test::TempDir* dir_;
};
mi_test::TempDir* Int8Engine::dir_ = nullptr;

TEST_F(Int8Engine, TinyInt8EngineIsVerifiedAgainstTheQuantisedOracle) {
  const json report = verify(*dir_ / "base", {});
  ASSERT_EQ(report.at("state"), "PASS_VERIFIED_ORACLE") << report.dump(1);
  json acceptance;
  for (const auto& g : report.at("gates"))
    if (g.at("id") == "PASS_VERIFIED") acceptance = g;
  ASSERT_FALSE(acceptance.is_null()) << report.dump(1);
  const json& ev = acceptance.at("evidence");
  EXPECT_EQ(ev.at("route"), "oracle") << "an int8 engine is never judged by the bf16 HF trace's greedy ids";
  const double worst = ev.at("int8").at("worst_accuracy_relative_vs_unquantised").get<double>();
  EXPECT_GT(worst, 0.0) << "quantisation must be visible against the unquantised model";
  EXPECT_LE(worst, ev.at("int8").at("accuracy_bound_relative").get<double>());
}

TEST_F(Int8Engine, PerTensorScaleFailsAcceptance) {
  const fs::path e = copy("per-tensor");
  const fs::path header = e / "src" / "model" / "int8_weights.h";
  std::string text = mi::generator::read_file(header);
  // Quantise with one scale for the whole tensor (max over all elements / 127) instead of one per row.
  const std::string marker = "  pool.parallel_chunks(rows, 64, [&](int chunk, int r0, int r1) {";
  const auto pos = text.find(marker);
  ASSERT_NE(pos, std::string::npos);
  text.replace(pos, marker.size(),
               "  {\n"
               "    float t = 0.0f;\n"
               "    for (std::size_t i = 0; i < std::size_t(rows) * std::size_t(cols); ++i) t = std::max(t, std::fabs(detail::widen_element(w[i])));\n"
               "    for (int r = 0; r < rows; ++r) {\n"
               "      m.scale[std::size_t(r)] = t / 127.0f;\n"
               "      for (int c = 0; c < cols; ++c)\n"
               "        m.q[std::size_t(r) * std::size_t(cols) + std::size_t(c)] = int8_t(std::clamp(std::nearbyint(detail::widen_element(w[std::size_t(r) * std::size_t(cols) + std::size_t(c)]) / m.scale[std::size_t(r)]), -127.0f, 127.0f));\n"
               "    }\n"
               "  }\n"
               "  if (rows < 0) pool.parallel_chunks(rows, 64, [&](int chunk, int r0, int r1) {");
  mi::generator::write_file(header, text);
  const json report = verify(e, {"--only", "PASS_VERIFIED", "--allow-modified-sources"});
  EXPECT_EQ(report.at("state"), "FAILED:PASS_VERIFIED") << report.dump(1);
  EXPECT_NE(report.dump().find("precise teacher-forced logits"), std::string::npos) << report.dump(1);
}

TEST_F(Int8Engine, FastModeIsRefused) {
  const json manifest = json::parse(mi::generator::read_file(*dir_ / "base" / "MANIFEST.json"));
  EXPECT_EQ(manifest.at("dtype"), "int8");
  const auto plan = metainfer({"plan", "--model", golden("qwen3-tiny").string(), "--dtype", "int8", "--numerics", "fast"});
  EXPECT_EQ(plan.exit_code, 2);
  EXPECT_NE(plan.err.find("runtime.numerics"), std::string::npos) << plan.err;
}

}  // namespace
