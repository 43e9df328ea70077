// `metainfer oracle` as a real binary: greedy ids of a golden prompt (dense and hybrid) equal the trace; bad input
// exits 2 naming it.
#include <gtest/gtest.h>

#include <algorithm>

#include "oracle_support.h"

namespace {

using namespace oracle_test;

std::string join(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(ids[i]);
  }
  return s;
}

TEST(OracleCli, GoldenPromptMatchesTrace) {
  const json trace = read_json(mi_test::golden("qwen3-tiny") / "trace.json");
  const json& p1 = trace.at("prompts").at(1);
  const auto prompt = p1.at("prompt_ids").get<std::vector<int>>();
  const auto expected = p1.at("greedy_ids").get<std::vector<int>>();
  const auto margins = p1.at("margins").get<std::vector<double>>();
  const auto r = mi_test::metainfer({"oracle", "--model", mi_test::golden("qwen3-tiny").string(), "--prompt-ids",
                                     join(prompt), "--max-new-tokens", std::to_string(expected.size()),
                                     "--threads", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const json out = mi_test::last_json_line(r.out);
  EXPECT_EQ(out.at("output_ids").get<std::vector<int>>(), expected);
  const auto got_margins = out.at("margins").get<std::vector<double>>();
  ASSERT_EQ(got_margins.size(), margins.size());
  for (size_t i = 0; i < margins.size(); ++i) EXPECT_NEAR(got_margins[i], margins[i], 2e-4) << "step " << i;
  EXPECT_EQ(out.at("runner_up_ids").size(), expected.size());

  // Without --json: a table, one line per step, default 16 steps.
  const auto plain = mi_test::metainfer({"oracle", "--model", mi_test::golden("qwen3-tiny").string(),
                                         "--prompt-ids", join(prompt)});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("0\t" + std::to_string(expected[0]) + "\t"), std::string::npos) << plain.out;
  EXPECT_EQ(std::count(plain.out.begin(), plain.out.end(), '\n'), 17);
}

TEST(OracleCli, HybridGoldenPromptsMatchTraces) {
  for (const char* c : {"qwen3_5-tiny", "qwen3_next-tiny"}) {
    SCOPED_TRACE(c);
    const json p1 = read_json(mi_test::golden(c) / "trace.json").at("prompts").at(1);
    const auto expected = p1.at("greedy_ids").get<std::vector<int>>();
    const auto r = mi_test::metainfer({"oracle", "--model", mi_test::golden(c).string(), "--prompt-ids",
                                       join(p1.at("prompt_ids").get<std::vector<int>>()), "--max-new-tokens",
                                       std::to_string(expected.size()), "--threads", "2", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_EQ(mi_test::last_json_line(r.out).at("output_ids").get<std::vector<int>>(), expected);
  }
}

TEST(OracleCli, BadInputExitsTwo) {
  mi_test::TempDir tmp("oracle-cli");
  auto r = mi_test::metainfer({"oracle", "--model", (tmp / "nope").string(), "--prompt-ids", "1,2"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("nope"), std::string::npos) << r.err;

  copy_case("qwen3_5-tiny", tmp / "moe", [](json& c) { c["architectures"] = {"Qwen3_5MoeForCausalLM"}; });
  r = mi_test::metainfer({"oracle", "--model", (tmp / "moe").string(), "--prompt-ids", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("architectures"), std::string::npos) << r.err;

  r = mi_test::metainfer({"oracle", "--model", mi_test::golden("qwen3-tiny").string(), "--prompt-ids", "1,x"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--prompt-ids"), std::string::npos) << r.err;

  r = mi_test::metainfer({"oracle", "--model", mi_test::golden("qwen3-tiny").string(), "--prompt-ids", "1,9999"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("9999"), std::string::npos) << r.err;

  r = mi_test::metainfer({"oracle", "--prompt-ids", "1"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
}

}  // namespace
