// What a stage's test-contract executable actually ran, read from GoogleTest's own JSON report
// (--gtest_output=json:FILE) rather than from its exit status. The executable links agent-written (or
// generator-copied) sources, and an exit status is the easiest thing for such code to fake: a static initialiser that
// calls exit(0), a main() of its own, a crash handler that exits 0. A stage passes only when the report exists, every
// test the contract declares ran to completion (none skipped, none missing) and no test failed, so an executable that
// runs nothing, or other tests than the contract's, fails the gate.
//
// The expected tests come from the contract's source (TEST, TEST_F, TEST_P, TYPED_TEST, TYPED_TEST_P, GTEST_TEST;
// hash-checked before B0 builds it), not from the executable: a binary can only be judged against what the contract
// says. The report must show exactly those tests (a parameterised or typed test as its instances), with totals that
// agree with its entries.
//
// What no check of the report can close: code linked into the executable runs in its process, so it can read its
// own command line and write a well-formed report of its own. The stage source rules (stage_source_rules.h) refuse
// the easy routes to that, and the out-of-process gates (acceptance against the checkpoint's trace or the oracle)
// judge the engine binary by its output, where no such report is trusted.
#pragma once
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::gates {

// "Suite.Name" of every test a GoogleTest source defines, in order, once each; what is not code (comments, string
// and raw string literals; cpp_code_text.h) is skipped, a macro split across lines is read whole, and DISABLED_
// tests are left out (GoogleTest never runs them).
std::vector<std::string> declared_gtest_tests(const std::string& source);

struct GtestVerdict {
  bool passed = false;
  int tests_run = 0;                  // tests that ran to completion (result COMPLETED)
  std::vector<std::string> failed;    // "Suite.Name: first failure message"
  std::vector<std::string> missing;   // declared tests the report does not show as run
  std::vector<std::string> extra;     // tests the report shows as run that the contract does not declare
  std::string problem;                // why the report cannot be judged ("" when it can)
  std::string describe() const;       // one line
};

// Judges GoogleTest's JSON report (format of --gtest_output=json) against the declared tests.
GtestVerdict judge_gtest_report(const nlohmann::json& report, const std::vector<std::string>& declared);

}  // namespace mi::gates
