// The main() of every unit-test executable: GoogleTest's, plus one rule. When a suite's SetUpTestSuite fails,
// GoogleTest marks its tests SKIPPED, and CTest (gtest_discover_tests matches "[  SKIPPED ]") would then report a
// broken suite as skipped, not failed: a suite that cannot build its engine would pass CI. So before a test of such
// a suite starts, the failure is reported and the process exits 1 with no SKIPPED line printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

namespace {

class FailedSuiteSetUpIsAFailure : public ::testing::EmptyTestEventListener {
  void OnTestStart(const ::testing::TestInfo& test) override {
    const ::testing::TestSuite* suite = ::testing::UnitTest::GetInstance()->current_test_suite();
    if (suite && suite->ad_hoc_test_result().Failed()) {
      std::fprintf(stderr, "FAILED: SetUpTestSuite of %s failed (see above); %s cannot run\n", test.test_suite_name(),
                   test.name());
      std::fflush(nullptr);
      std::_Exit(1);
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::UnitTest::GetInstance()->listeners().Append(new FailedSuiteSetUpIsAFailure);
  return RUN_ALL_TESTS();
}
