// Where only plain `unshare -n` isolates (no mount or PID namespace: the whole host file system is readable), every
// path that runs agent-influenced code and must keep the host's files out of sight refuses to run: agents' commands
// under either switch (the workflow's records are always there to hide), and the gates (script gates and the engine
// gate's verifier, which run agent-written code and do not know the round's switch). run_isolated_command itself
// enforces it, so no caller can forget to.
#include <gtest/gtest.h>

#include <cstdlib>

#include "../toolkit_support.h"
#include "agents/isolated_command.h"
#include "agents/stage_loop.h"
#include "agents/tool_sandbox.h"
#include "agents_test_support.h"
#include "common/error.h"

namespace {

namespace fs = std::filesystem;
using namespace mi::agents;
using agents_test::write;

struct PlainUnshare {
  PlainUnshare() { ::setenv("METAINFER_AGENT_ISOLATION", "unshare-net", 1); }
  ~PlainUnshare() { ::unsetenv("METAINFER_AGENT_ISOLATION"); }
};

TEST(AgentIsolationPlainUnshare, GatesAndCommandsThatMustBeConfinedRefuseIt) {
  const PlainUnshare forced;
  if (command_isolation().kind != IsolationKind::unshare_net) GTEST_SKIP() << "no unshare here: " << command_isolation().description;
  ASSERT_FALSE(command_isolation().hides_paths) << command_isolation().description;
  mi_test::TempDir dir("plain-unshare");
  const fs::path run = dir / "run";
  write(run / "src/kernel.cpp", "int f() { return 1; }\n");
  // A gate script whose agent-written code could read anything on the host: it must not run at all.
  write(run / "gates/stage.sh", "echo RAN > ran.txt\n");
  const GateOutcome g = script_gate(30, 16 * 1024, {})(run, "stage");
  EXPECT_FALSE(g.passed) << g.evidence;
  EXPECT_NE(g.evidence.find("refused"), std::string::npos) << g.evidence;
  EXPECT_FALSE(fs::exists(run / "ran.txt"));
  // The chokepoint every gate goes through (the engine gate's verifier too): confinement is the default.
  EXPECT_THROW(run_isolated_command("echo RAN > ran.txt", run, {}, 30, 1024), mi::Error);
  EXPECT_FALSE(fs::exists(run / "ran.txt"));

  // An agent's command: refused with either switch. With it ON and no reference configured there is still the
  // workflow's records to hide: the transcripts hold every role's tool results (the explorer's reference reads among
  // them), and an unconfined shell could read them.
  const AgentRoleSpec impl = find_role(fs::path(METAINFER_SOURCE_DIR) / "ckb/roles", "implementer");
  SandboxConfig c;
  c.run_dir = run;
  c.command_timeout_s = 30;
  for (const SourceSwitch sw : {SourceSwitch::off, SourceSwitch::on}) {
    c.source_switch = sw;
    ToolSandbox sb(c);
    const ToolOutcome r = sb.call(impl, "run_command", {{"command", "echo RAN > src/ran.txt"}});
    EXPECT_FALSE(r.ok) << to_string(sw);
    EXPECT_NE(r.output.find("refused"), std::string::npos) << r.output;
    EXPECT_FALSE(fs::exists(run / "src/ran.txt")) << to_string(sw);
  }
}

}  // namespace
