#include "gates/gtest_results.h"

#include <map>
#include <regex>

namespace mi::gates {

namespace {

// The source with // and /* */ comments blanked, so a test named in a comment is not expected to run.
std::string without_comments(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    if (s.compare(i, 2, "//") == 0) {
      while (i < s.size() && s[i] != '\n') ++i;
    } else if (s.compare(i, 2, "/*") == 0) {
      const std::size_t end = s.find("*/", i + 2);
      i = end == std::string::npos ? s.size() : end + 2;
      out += ' ';
    } else if (s[i] == '"') {  // a string literal may hold "//"
      out += s[i++];
      while (i < s.size() && s[i] != '"' && s[i] != '\n') {
        if (s[i] == '\\' && i + 1 < s.size()) out += s[i++];
        out += s[i++];
      }
      if (i < s.size()) out += s[i++];
    } else {
      out += s[i++];
    }
  }
  return out;
}

}  // namespace

std::vector<std::string> declared_gtest_tests(const std::string& source) {
  static const std::regex test_macro(R"((?:^|[^A-Za-z0-9_])TEST(?:_F)?\s*\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\))");
  std::vector<std::string> out;
  const std::string text = without_comments(source);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), test_macro); it != std::sregex_iterator(); ++it)
    out.push_back((*it)[1].str() + "." + (*it)[2].str());
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
  // result per "Suite.Name" as the report gives it
  std::map<std::string, std::string> result;
  for (const auto& suite : report["testsuites"]) {
    if (!suite.is_object() || !suite.contains("testsuite") || !suite["testsuite"].is_array()) continue;
    const std::string suite_name = suite.value("name", "");
    for (const auto& t : suite["testsuite"]) {
      if (!t.is_object()) continue;
      const std::string name = suite_name + "." + t.value("name", "");
      const bool completed = t.value("status", "") == "RUN" && t.value("result", "") == "COMPLETED";
      const bool failures = t.contains("failures") && t["failures"].is_array() && !t["failures"].empty();
      if (failures) {
        std::string first = t["failures"][0].is_object() ? t["failures"][0].value("failure", "") : "";
        if (const auto nl = first.find('\n'); nl != std::string::npos) first = first.substr(0, nl);
        v.failed.push_back(name + (first.empty() ? "" : ": " + first));
      }
      if (completed) ++v.tests_run;
      result[name] = failures ? "FAILED" : completed ? "COMPLETED" : t.value("result", t.value("status", "?"));
    }
  }
  for (const auto& d : declared) {
    const auto it = result.find(d);
    if (it == result.end() || (it->second != "COMPLETED" && it->second != "FAILED")) v.missing.push_back(d);
  }
  // The report's own totals must agree: a failure counted at the top level but attached to no test (a failure in
  // a test suite's set-up) fails the stage too.
  const int top_failures = report.contains("failures") && report["failures"].is_number_integer() ? report["failures"].get<int>() : 0;
  const int top_errors = report.contains("errors") && report["errors"].is_number_integer() ? report["errors"].get<int>() : 0;
  if (v.failed.empty() && (top_failures > 0 || top_errors > 0))
    v.failed.push_back("the report counts " + std::to_string(top_failures) + " failure(s) and " + std::to_string(top_errors) + " error(s)");
  v.passed = v.tests_run > 0 && v.failed.empty() && v.missing.empty();
  return v;
}

}  // namespace mi::gates
