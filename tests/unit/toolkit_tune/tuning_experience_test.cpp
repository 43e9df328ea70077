// Kernel parameters from the experience layer (tune/tuning_experience.h): an engine generated without --tune starts
// from what `generate --tune` measured before on the same CPU (vendor, family, model), threads, numerics and weight
// dtype; a measurement from another CPU, another thread count, numerics or dtype, a parameter the constraints set, a
// value the platform does not declare, or a parameter the tuner would not time for the engine is not taken.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "../toolkit_support.h"
#include "ckb/ckb.h"
#include "platform/cpu_info.h"
#include "tune/tuning_experience.h"

namespace {
namespace fs = std::filesystem;
using nlohmann::json;

mi::ckb::Platform test_platform() {
  mi::ckb::Platform p;
  p.id = "x86-64-test";
  p.tuning.push_back({"MI_TUNE_ROWS", "matvec", {4, 8}, 4, "", {}});
  p.tuning.push_back({"MI_TUNE_PREFETCH", "decode", {0, 1}, 1, "", {}});
  p.tuning.push_back({"MI_TUNE_FAST_ONLY", "matmul", {0, 1}, 1, "", {"fast"}});
  return p;
}

mi::coverage::Plan test_plan(const std::string& numerics, int max_batch) {
  mi::coverage::Plan plan;
  plan.dtype = "bf16";
  plan.threads = 2;
  plan.constraints.numerics = numerics;
  plan.constraints.max_batch = max_batch;
  return plan;
}

mi::platform::CpuInfo test_cpu(int family, int model) {
  mi::platform::CpuInfo cpu;
  cpu.vendor = "AuthenticAMD";
  cpu.brand = "Some Virtual CPU";
  cpu.family = family;
  cpu.model = model;
  return cpu;
}

// A measurement as `generate --tune` appends it; op is the test platform's for the parameter unless given.
std::string measurement(const std::string& parameter, int chosen, int family = 26, int model = 2, int threads = 2,
                        const std::string& numerics = "fast", int tokens = 1, const std::string& date = "2026-12-01T00:00:00Z",
                        std::string op = "") {
  if (op.empty())
    for (const auto& p : test_platform().tuning)
      if (p.parameter == parameter) op = p.op;
  return "[[measurement]]\ndate = \"" + date + "\"\nplatform = \"x86-64-test\"\ncpu = \"Some Virtual CPU\"\n" +
         "cpu_vendor = \"AuthenticAMD\"\ncpu_family = " + std::to_string(family) + "\ncpu_model = " + std::to_string(model) +
         "\nmodel = \"m\"\nparameter = \"" + parameter + "\"\nop = \"" + op + "\"\nthreads = " + std::to_string(threads) +
         "\ntokens = " + std::to_string(tokens) + "\nnumerics = \"" + numerics + "\"\nshapes = [[8, 8]]\nchosen = " +
         std::to_string(chosen) + "\nseconds = { \"4\" = 0.2, \"8\" = 0.1 }\n\n";
}

TEST(TuningExperience, TakesTheSameCpusThreadsAndNumericsMeasurements) {
  mi_test::TempDir dir("tuneexp");
  const fs::path file = dir / "kernel_tuning.toml";
  mi_test::write_text(file, measurement("MI_TUNE_ROWS", 8) + measurement("MI_TUNE_PREFETCH", 0, 26, 2, 2, "fast", 8) +
                                measurement("MI_TUNE_FAST_ONLY", 0));
  const auto found = mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), test_cpu(26, 2));
  EXPECT_EQ(found.choice, (std::map<std::string, int>{{"MI_TUNE_ROWS", 8}, {"MI_TUNE_PREFETCH", 0}, {"MI_TUNE_FAST_ONLY", 0}}));
  EXPECT_EQ(found.report.at("MI_TUNE_ROWS").at("source"), "experience");
  EXPECT_EQ(found.report.at("MI_TUNE_ROWS").at("experience").at("date"), "2026-12-01T00:00:00Z");

  // Another microarchitecture (family or model), thread count or numerics: nothing.
  for (const auto& cpu : {test_cpu(25, 2), test_cpu(26, 17)})
    EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), cpu).choice.empty());
  mi::coverage::Plan four_threads = test_plan("fast", 8);
  four_threads.threads = 4;
  EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), four_threads, test_cpu(26, 2)).choice.empty());
  EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), test_plan("precise", 8), test_cpu(26, 2)).choice.empty());
  mi::platform::CpuInfo intel = test_cpu(26, 2);
  intel.vendor = "GenuineIntel";
  EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), intel).choice.empty());
  mi::ckb::Platform other = test_platform();
  other.id = "x86-64-other";
  EXPECT_TRUE(mi::tune::experience_tuning(file, other, test_plan("fast", 8), test_cpu(26, 2)).choice.empty());
  mi::platform::CpuInfo unknown = test_cpu(0, 0);
  EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), unknown).choice.empty());
  // A missing file is no experience, not an error.
  EXPECT_TRUE(mi::tune::experience_tuning(dir / "absent.toml", test_platform(), test_plan("fast", 8), test_cpu(26, 2)).choice.empty());
}

TEST(TuningExperience, ConstraintsUndeclaredValuesAndUntimedParametersAreLeftAlone) {
  mi_test::TempDir dir("tuneexp2");
  const fs::path file = dir / "kernel_tuning.toml";
  mi_test::write_text(file, measurement("MI_TUNE_ROWS", 8, 26, 2, 2, "precise") +
                                measurement("MI_TUNE_PREFETCH", 7, 26, 2, 2, "precise") +  // not a declared value
                                measurement("MI_TUNE_FAST_ONLY", 0, 26, 2, 2, "precise"));
  // A later measurement where no candidate passed ("default") overrides nothing.
  std::ofstream(file, std::ios::app) << "[[measurement]]\ndate = \"2026-12-02T00:00:00Z\"\nplatform = \"x86-64-test\"\n"
                                        "cpu_vendor = \"AuthenticAMD\"\ncpu_family = 26\ncpu_model = 2\n"
                                        "parameter = \"MI_TUNE_ROWS\"\nop = \"matvec\"\nthreads = 2\ntokens = 1\nnumerics = \"precise\"\n"
                                        "chosen = \"default\"\nseconds = { }\n";
  mi::coverage::Plan plan = test_plan("precise", 1);
  EXPECT_EQ(mi::tune::experience_tuning(file, test_platform(), plan, test_cpu(26, 2)).choice,
            (std::map<std::string, int>{{"MI_TUNE_ROWS", 8}}))
      << "MI_TUNE_FAST_ONLY is not read by precise kernels; 7 is not a value of MI_TUNE_PREFETCH";
  plan.constraints.tuning["MI_TUNE_ROWS"] = 4;
  EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), plan, test_cpu(26, 2)).choice.empty()) << "the constraints decide";
  mi::coverage::Plan int8 = test_plan("precise", 1);
  int8.dtype = "int8";
  EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), int8, test_cpu(26, 2)).choice.empty())
      << "these parameters are declared for bf16 weights only";
}

// A parameter declared for int8 weights too (ckb/platforms [[tuning]] dtypes) is timed on int8 engines, and the
// measurement names its dtype: an int8 engine takes int8 measurements, a bf16 engine bf16 ones (a measurement
// without a dtype was written when only bf16 weights were timed).
TEST(TuningExperience, MeasurementsApplyToEnginesOfTheirWeightDtype) {
  mi_test::TempDir dir("tuneexp8");
  const fs::path file = dir / "kernel_tuning.toml";
  const auto with_dtype = [](std::string m, const std::string& dtype) {
    return m.replace(m.find("numerics = "), 0, "dtype = \"" + dtype + "\"\n");
  };
  mi_test::write_text(file, measurement("MI_TUNE_ROWS", 8, 26, 2, 2, "precise") +
                                with_dtype(measurement("MI_TUNE_PREFETCH", 0, 26, 2, 2, "precise"), "int8") +
                                with_dtype(measurement("MI_TUNE_ROWS", 4, 26, 2, 2, "precise"), "int8") +
                                with_dtype(measurement("MI_TUNE_PREFETCH", 1, 26, 2, 2, "precise"), "bf16"));
  mi::ckb::Platform platform = test_platform();
  for (auto& p : platform.tuning)
    if (p.parameter != "MI_TUNE_FAST_ONLY") p.dtypes = {"bf16", "int8"};
  mi::coverage::Plan int8 = test_plan("precise", 1);
  int8.dtype = "int8";
  const auto found8 = mi::tune::experience_tuning(file, platform, int8, test_cpu(26, 2));
  EXPECT_EQ(found8.choice, (std::map<std::string, int>{{"MI_TUNE_ROWS", 4}, {"MI_TUNE_PREFETCH", 0}}));
  EXPECT_EQ(found8.report.at("MI_TUNE_ROWS").at("experience").at("dtype"), "int8");
  EXPECT_EQ(mi::tune::experience_tuning(file, platform, test_plan("precise", 1), test_cpu(26, 2)).choice,
            (std::map<std::string, int>{{"MI_TUNE_ROWS", 8}, {"MI_TUNE_PREFETCH", 1}}))
      << "the bf16 engine takes the measurement without a dtype and the bf16 one, never the int8 ones";
}

TEST(TuningExperience, TheLastMeasurementAtTheEnginesTokenCountWins) {
  mi_test::TempDir dir("tuneexp3");
  const fs::path file = dir / "kernel_tuning.toml";
  // MI_TUNE_PREFETCH (a decode parameter) measured at 8 tokens, later at 1 token, then again at 8.
  mi_test::write_text(file, measurement("MI_TUNE_PREFETCH", 0, 26, 2, 2, "fast", 8, "2026-12-01T00:00:00Z") +
                                measurement("MI_TUNE_PREFETCH", 1, 26, 2, 2, "fast", 1, "2026-12-02T00:00:00Z") +
                                measurement("MI_TUNE_PREFETCH", 0, 26, 2, 2, "fast", 8, "2026-12-03T00:00:00Z"));
  auto found = mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), test_cpu(26, 2));
  EXPECT_EQ(found.choice.at("MI_TUNE_PREFETCH"), 0);
  EXPECT_EQ(found.report.at("MI_TUNE_PREFETCH").at("experience").at("date"), "2026-12-03T00:00:00Z");
  found = mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 1), test_cpu(26, 2));
  EXPECT_EQ(found.choice.at("MI_TUNE_PREFETCH"), 1) << "a one-sequence engine takes the one-token measurement";
}

// A parameter whose timing objective changed (MI_TUNE_DOT_PREFETCH: one token plus the batch, then one token alone
// once the batched blocks read MI_TUNE_BATCH_PREFETCH) does not take values chosen on the old objective.
TEST(TuningExperience, MeasurementsTimedAsAnotherOpAreNotTaken) {
  mi_test::TempDir dir("tuneexpop");
  const fs::path file = dir / "kernel_tuning.toml";
  mi_test::write_text(file, measurement("MI_TUNE_ROWS", 8, 26, 2, 2, "fast", 8, "2026-12-02T00:00:00Z", "decode"));
  EXPECT_TRUE(mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), test_cpu(26, 2)).choice.empty())
      << "MI_TUNE_ROWS is a matvec parameter; a decode timing of it is not its measurement";
  mi_test::write_text(file, measurement("MI_TUNE_ROWS", 8, 26, 2, 2, "fast", 1, "2026-12-01T00:00:00Z") +
                                measurement("MI_TUNE_ROWS", 4, 26, 2, 2, "fast", 1, "2026-12-02T00:00:00Z", "decode"));
  const auto found = mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), test_cpu(26, 2));
  EXPECT_EQ(found.choice, (std::map<std::string, int>{{"MI_TUNE_ROWS", 8}}))
      << "the later decode timing, at the same token count, is skipped for its op alone";
  EXPECT_EQ(found.report.at("MI_TUNE_ROWS").at("experience").at("date"), "2026-12-01T00:00:00Z");
}

TEST(TuningExperience, BadTomlNamesTheFile) {
  mi_test::TempDir dir("tuneexp4");
  const fs::path file = dir / "kernel_tuning.toml";
  mi_test::write_text(file, "[[measurement]\n");
  try {
    mi::tune::experience_tuning(file, test_platform(), test_plan("fast", 8), test_cpu(26, 2));
    FAIL() << "expected mi::Error";
  } catch (const mi::Error& e) {
    EXPECT_NE(std::string(e.what()).find("kernel_tuning.toml"), std::string::npos) << e.what();
  }
}

// Through the CLI: a measurement for this host's CPU reaches the engine (constraints [tuning], the CMake define,
// MANIFEST.json "tuning" with its source), and `generate` says so on stderr; one for another CPU does not; a
// parameter the constraints file sets keeps its value beside the ones taken from experience.
TEST(TuningExperience, GenerateStartsFromThisCpusMeasurements) {
  const mi::platform::CpuInfo cpu = mi::platform::detect_cpu();
  if (cpu.family == 0 || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
      !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
    GTEST_SKIP() << "needs an identified CPU that runs x86-64-avx512";
  const mi::ckb::Ckb repo_ckb = mi::ckb::load(mi::ckb::default_ckb_dir());
  const char* id = "x86-64-avx512";
  const mi::ckb::Platform* platform = repo_ckb.find_platform(id);
  ASSERT_NE(platform, nullptr);
  const auto rows = std::find_if(platform->tuning.begin(), platform->tuning.end(),
                                 [](const auto& t) { return t.parameter == "MI_TUNE_MATVEC_ROWS"; });
  if (rows == platform->tuning.end()) GTEST_SKIP() << id << " declares no MI_TUNE_MATVEC_ROWS";
  int other = rows->default_value;
  for (int v : rows->values)
    if (v != rows->default_value) other = v;
  ASSERT_NE(other, rows->default_value);
  for (const bool same_cpu : {true, false}) {
    SCOPED_TRACE(same_cpu ? "this CPU" : "another CPU");
    mi_test::TempDir dir(same_cpu ? "tuneexpcli" : "tuneexpcli2");
    fs::copy(mi::ckb::default_ckb_dir(), dir / "ckb", fs::copy_options::recursive);
    // The file's only measurement (whatever the repository ships for other CPUs must not decide this test).
    std::ofstream(dir / "ckb/experience/kernel_tuning.toml")
        << "\n[[measurement]]\ndate = \"2026-12-03T00:00:00Z\"\nplatform = \"" << id << "\"\ncpu = " << json(cpu.brand).dump()
        << "\ncpu_vendor = " << json(cpu.vendor).dump() << "\ncpu_family = " << (same_cpu ? cpu.family : cpu.family + 1)
        << "\ncpu_model = " << cpu.model << "\nmodel = \"qwen3-tiny\"\nparameter = \"MI_TUNE_MATVEC_ROWS\"\nop = \"matvec\"\n"
        << "threads = 2\ntokens = 1\nnumerics = \"precise\"\nshapes = [[64, 64]]\nchosen = " << other
        << "\nseconds = { }\n"
        // and MI_TUNE_ROW_STREAMS = 1, which the constraints file below sets to 0 (the constraints decide)
        << "\n[[measurement]]\ndate = \"2026-12-03T00:00:00Z\"\nplatform = \"" << id << "\"\ncpu_vendor = "
        << json(cpu.vendor).dump() << "\ncpu_family = " << cpu.family << "\ncpu_model = " << cpu.model
        << "\nparameter = \"MI_TUNE_ROW_STREAMS\"\nop = \"matvec\"\nthreads = 2\ntokens = 1\nnumerics = \"precise\"\n"
        << "chosen = 1\nseconds = { }\n";
    mi_test::write_text(dir / "c.toml", "[platform]\nname = \"" + std::string(id) + "\"\n[tuning]\nMI_TUNE_ROW_STREAMS = 0\n");
    const auto r = mi_test::metainfer({"generate", (dir / "c.toml").string(), "--model", mi_test::golden("qwen3-tiny").string(),
                                       "--threads", "2", "--no-verify", "--ckb", (dir / "ckb").string(), "-o",
                                       (dir / "e").string()});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::stringstream m, c;
    m << std::ifstream(dir / "e/MANIFEST.json").rdbuf();
    c << std::ifstream(dir / "e/CMakeLists.txt").rdbuf();
    const json manifest = json::parse(m.str());
    const std::string define = "MI_TUNE_MATVEC_ROWS=" + std::to_string(other);
    if (same_cpu) {
      EXPECT_EQ(manifest.at("tuning").at("MI_TUNE_MATVEC_ROWS").at("chosen"), other) << manifest.at("tuning").dump(1);
      EXPECT_EQ(manifest.at("tuning").at("MI_TUNE_MATVEC_ROWS").at("source"), "experience");
      EXPECT_EQ(manifest.at("constraints").at("tuning").at("MI_TUNE_MATVEC_ROWS"), other);
      EXPECT_NE(c.str().find(define), std::string::npos) << c.str();
      EXPECT_NE(r.err.find("MI_TUNE_MATVEC_ROWS = " + std::to_string(other) + " from"), std::string::npos) << r.err;
      EXPECT_EQ(manifest.at("constraints").at("tuning").at("MI_TUNE_ROW_STREAMS"), 0) << "the constraints' own [tuning] stays";
      EXPECT_FALSE(manifest.at("tuning").contains("MI_TUNE_ROW_STREAMS"));
      EXPECT_NE(c.str().find("MI_TUNE_ROW_STREAMS=0"), std::string::npos) << c.str();
    } else {
      EXPECT_FALSE(manifest.at("tuning").contains("MI_TUNE_MATVEC_ROWS")) << manifest.at("tuning").dump(1);
      EXPECT_EQ(c.str().find(define), std::string::npos);
      EXPECT_EQ(manifest.at("constraints").at("tuning").at("MI_TUNE_ROW_STREAMS"), 0);
    }
  }
}

}  // namespace
