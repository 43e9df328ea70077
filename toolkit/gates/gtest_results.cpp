#include "gates/gtest_results.h"

#include <algorithm>
#include <map>
#include <regex>
#include <set>

#include "gates/cpp_code_text.h"

namespace mi::gates {

namespace {

// A test disabled in the contract (DISABLED_ on its suite or its name) is compiled but never run by design.
bool disabled(const std::string& suite, const std::string& name) {
  return suite.rfind("DISABLED_", 0) == 0 || name.rfind("DISABLED_", 0) == 0;
}

// "Suite.Name" of a test as the report names it, with what parameterised and typed tests add taken off: TEST_P
// instances are "Prefix/Suite" + "Name/0", TYPED_TEST ones "Suite/0" + "Name", TYPED_TEST_P ones "Prefix/Suite/0" +
// "Name". The suite is the last part of its name that is not a type index; the name is its part before the first '/'.
std::string declared_name_of(const std::string& report_suite, const std::string& report_name) {
  std::string suite;
  std::size_t from = 0;
  while (from <= report_suite.size()) {
    const std::size_t slash = std::min(report_suite.find('/', from), report_suite.size());
    const std::string part = report_suite.substr(from, slash - from);
    if (!part.empty() && part.find_first_not_of("0123456789") != std::string::npos) suite = part;
    from = slash + 1;
  }
  return suite + "." + report_name.substr(0, report_name.find('/'));
}

}  // namespace

std::vector<std::string> declared_gtest_tests(const std::string& source) {
  // Every macro that defines a test GoogleTest runs (FRIEND_TEST, TYPED_TEST_SUITE and the INSTANTIATE_ macros only
  // name tests, and a letter or underscore in front of TEST keeps them out). Matched on the code alone
  // (cpp_code_text.h): a test inside a comment or a string literal is not one, and a macro split across lines is.
  static const std::regex test_macro(
      R"((?:^|[^A-Za-z0-9_])(?:TEST|TEST_F|TEST_P|TYPED_TEST|TYPED_TEST_P|GTEST_TEST)\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\))");
  std::vector<std::string> out;
  const std::string text = cpp_code_text(source);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), test_macro); it != std::sregex_iterator(); ++it) {
    const std::string suite = (*it)[1].str(), name = (*it)[2].str();
    if (disabled(suite, name)) continue;
    const std::string test = suite + "." + name;
    if (std::find(out.begin(), out.end(), test) == out.end()) out.push_back(test);
  }
  return out;
}

std::string GtestVerdict::describe() const {
  if (!problem.empty()) return problem;
  std::string s = std::to_string(tests_run) + " test(s) ran";
  if (!failed.empty()) s += ", " + std::to_string(failed.size()) + " failed (" + failed.front() + (failed.size() > 1 ? ", ..." : "") + ")";
  if (!missing.empty()) {
    s += ", " + std::to_string(missing.size()) + " declared test(s) did not run (";
    for (std::size_t i = 0; i < missing.size() && i < 5; ++i) s += (i ? ", " : "") + missing[i];
    s += missing.size() > 5 ? ", ...)" : ")";
  }
  if (!extra.empty()) {
    // The engine's sources define no tests, so a test beyond the contract's was compiled in from elsewhere or
    // invented by whoever wrote the report.
    s += ", " + std::to_string(extra.size()) + " test(s) ran that the contract does not declare (" + extra.front() +
         (extra.size() > 1 ? ", ...)" : ")");
  }
  return s;
}

GtestVerdict judge_gtest_report(const nlohmann::json& report, const std::vector<std::string>& declared) {
  GtestVerdict v;
  if (!report.is_object() || !report.contains("testsuites") || !report["testsuites"].is_array()) {
    v.problem = "the test report is not GoogleTest JSON (no testsuites array)";
    return v;
  }
  if (declared.empty()) {
    v.problem = "the test contract declares no tests";
    return v;
  }
  const std::set<std::string> expected(declared.begin(), declared.end());
  // Per declared test: whether every instance of it the report shows completed (a TEST_P or TYPED_TEST has several).
  std::map<std::string, bool> completed_all;
  std::set<std::string> extra;
  int entries = 0;
  bool counts_agree = true;
  for (const auto& suite : report["testsuites"]) {
    if (!suite.is_object() || !suite.contains("testsuite") || !suite["testsuite"].is_array()) {
      counts_agree = false;
      continue;
    }
    const std::string suite_name = suite.value("name", "");
    if (!suite.contains("tests") || !suite["tests"].is_number_integer() || suite["tests"].get<int>() != int(suite["testsuite"].size()))
      counts_agree = false;
    for (const auto& t : suite["testsuite"]) {
      ++entries;
      if (!t.is_object()) continue;
      const std::string shown = suite_name + "." + t.value("name", "");
      const std::string name = declared_name_of(suite_name, t.value("name", ""));
      const bool completed = t.value("status", "") == "RUN" && t.value("result", "") == "COMPLETED";
      const bool failures = t.contains("failures") && t["failures"].is_array() && !t["failures"].empty();
      if (failures) {
        std::string first = t["failures"][0].is_object() ? t["failures"][0].value("failure", "") : "";
        if (const auto nl = first.find('\n'); nl != std::string::npos) first = first.substr(0, nl);
        v.failed.push_back(shown + (first.empty() ? "" : ": " + first));
      }
      if (!expected.count(name)) {
        // A disabled test is listed but not run; anything else the contract does not declare was compiled in from
        // elsewhere (the engine's sources define no tests) or invented by whoever wrote the report.
        if (t.value("status", "") == "RUN" && !disabled(suite_name, t.value("name", ""))) extra.insert(shown);
        continue;
      }
      if (completed) ++v.tests_run;
      const bool ok = completed || failures;  // a failed test ran; one that did not complete (skipped) did not
      const auto it = completed_all.find(name);
      completed_all[name] = (it == completed_all.end() || it->second) && ok;
    }
  }
  for (const auto& d : declared) {
    const auto it = completed_all.find(d);
    if (it == completed_all.end() || !it->second) v.missing.push_back(d);
  }
  // The report's own totals must agree with its entries, as GoogleTest writes them: a hand-written report that lists
  // tests without counting them, or counts more than it lists, is not GoogleTest's.
  if (!report.contains("tests") || !report["tests"].is_number_integer() || report["tests"].get<int>() != entries) counts_agree = false;
  if (!counts_agree) {
    v.problem = "the test report's counts do not agree with the tests it lists (not a report GoogleTest wrote)";
    return v;
  }
  v.extra.assign(extra.begin(), extra.end());
  // A failure counted at the top level but attached to no test (a failure in a test suite's set-up) fails the stage
  // too.
  const int top_failures = report.contains("failures") && report["failures"].is_number_integer() ? report["failures"].get<int>() : 0;
  const int top_errors = report.contains("errors") && report["errors"].is_number_integer() ? report["errors"].get<int>() : 0;
  if (v.failed.empty() && (top_failures > 0 || top_errors > 0))
    v.failed.push_back("the report counts " + std::to_string(top_failures) + " failure(s) and " + std::to_string(top_errors) + " error(s)");
  v.passed = v.tests_run > 0 && v.failed.empty() && v.missing.empty() && v.extra.empty();
  return v;
}

}  // namespace mi::gates
