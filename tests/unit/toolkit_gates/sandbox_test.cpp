// The gates' engine sandbox hides the system paths it is given (by default the foreign framework sources installed
// under /usr, agents/system_references.h): an engine cannot read them, and the audit names each attempt. A test
// cannot plant a framework under the real /usr, so it hides two ordinary system paths and runs /usr/bin/cat as the
// "engine".
#include <gtest/gtest.h>

#include <algorithm>

#include "agents/system_references.h"
#include "gates/gates.h"
#include "gates/sandbox.h"
#include "generator/manifest.h"

namespace {
namespace fs = std::filesystem;
using mi::gates::Sandbox;

bool bubblewrap_runs() {
  try {
    Sandbox probe("/usr/bin/true", mi::generator::sha256_file("/usr/bin/true"));
    return true;
  } catch (const std::exception&) {
    return false;  // audited sandboxes refuse to exist without bubblewrap
  }
}

TEST(GateSandbox, HiddenSystemPathsAreUnreadableAndTheirNamingIsReported) {
  const fs::path file = "/usr/include/stdio.h", dir = "/usr/include/linux", in_dir = dir / "types.h";
  if (!fs::exists(file) || !fs::exists(in_dir)) GTEST_SKIP() << "no C headers installed here";
  if (!bubblewrap_runs()) GTEST_SKIP() << "no bubblewrap here";
  const std::string cat_sha = mi::generator::sha256_file("/usr/bin/cat");

  // Not hidden: the engine reads system headers like any other /usr file, and the audit is silent.
  {
    const Sandbox open("/usr/bin/cat", cat_sha, Sandbox::Mode::audited, {});
    const auto run = open.run({file.string(), in_dir.string()}, 60);
    EXPECT_EQ(run.result.exit_code, 0) << run.result.err;
    EXPECT_NE(run.result.out.find("#define"), std::string::npos);
    EXPECT_TRUE(run.outside_paths.empty()) << run.outside_paths.front();
  }
  // Hidden: the file reads as empty, the directory is empty, and both names are reported.
  const Sandbox hiding("/usr/bin/cat", cat_sha, Sandbox::Mode::audited, {file, dir});
  const auto run = hiding.run({file.string(), in_dir.string()}, 60);
  EXPECT_NE(run.result.exit_code, 0) << "types.h cannot exist in the hidden directory";
  EXPECT_EQ(run.result.out, "");
  for (const fs::path& p : {file, in_dir})
    EXPECT_NE(std::find(run.outside_paths.begin(), run.outside_paths.end(), p.string()), run.outside_paths.end())
        << p << " is not among the reported paths";
}

TEST(GateSandbox, TheGatesHideTheHostsInstalledReferenceTreesByDefault) {
  EXPECT_EQ(Sandbox::default_hidden(), mi::agents::host_system_reference_trees());
}

// `verify --hide PATH` (the agents' final gates pass their --reference trees): hidden besides the installed trees,
// as an absolute path; a path that does not exist has nothing to hide.
TEST(GateSandbox, VerifyHidesTheGivenPathsBesidesTheInstalledTrees) {
  mi::gates::GateOptions options;
  options.hidden_paths = {"/usr/include/../include/stdio.h", "/no/such/reference/tree"};
  const auto hidden = mi::gates::sandbox_hidden_paths(options);
  std::vector<fs::path> expected = Sandbox::default_hidden();
  if (fs::exists("/usr/include/stdio.h")) expected.push_back("/usr/include/stdio.h");
  EXPECT_EQ(hidden, expected);
}

}  // namespace
