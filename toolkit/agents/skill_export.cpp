#include "agents/skill_export.h"

#include <fstream>

#include "agents/agent_role.h"
#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

void write_file(const fs::path& p, const std::string& text, bool executable = false) {
  fs::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  if (!out) fail(p.string(), ": cannot write");
  if (executable)
    fs::permissions(p, fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add);
}

// Single-quoted for sh: the binary's path is baked into the scripts as their default.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string script(const std::string& purpose, const std::string& usage, const std::string& body, const fs::path& binary) {
  return "#!/bin/sh\n# " + purpose + "\n# usage: " + usage + "\nset -eu\nMETAINFER=\"${METAINFER:-}\"\n[ -n \"$METAINFER\" ] || METAINFER=" +
         sh_quote(binary.string()) + "\n" + body + "\n";
}

std::string role_reference(const AgentRoleSpec& r) {
  std::string s = "# Role: " + r.title + " (`" + r.id + "`)\n\n";
  if (!r.is_llm()) {
    // The verifier's row: no sub-agent plays it; the harness runs the gate runner and reads its verdict.
    return s + r.responsibility + "\n\nThis role is code, not a sub-agent: run `" + r.runs +
           "` (`scripts/verify.sh ENGINE_DIR`). Its report is the only PASS or FAIL; never ask a model for one.\n";
  }
  s += r.responsibility + "\n\n";
  s += "Run this role as its own sub-agent conversation, with no memory of other roles: it reads and writes files in "
       "the run directory only.\n\n";
  s += "**Tools it may use:** ";
  for (std::size_t i = 0; i < r.tools.size(); ++i) s += (i ? ", " : "") + ("`" + r.tools[i] + "`");
  s += "\n\n**It may write only:** ";
  if (r.write_paths.empty()) s += "nothing";
  for (std::size_t i = 0; i < r.write_paths.size(); ++i) s += (i ? ", " : "") + ("`" + r.write_paths[i] + "`");
  s += "\n\nIt never writes `tests/`, `gates/`, `test_contracts/` or the workflow's records, and it never declares PASS or FAIL.\n\n";
  s += "## Prompt\n\n" + r.prompt;
  if (!r.prompt.empty() && r.prompt.back() != '\n') s += "\n";
  return s;
}

}  // namespace

fs::path export_skill(const fs::path& dir, const fs::path& ckb_dir, const fs::path& metainfer_binary) {
  const fs::path root = dir / kSkillName;
  if (fs::exists(root) && !(fs::is_directory(root) && fs::is_empty(root)))
    fail(root.string(), ": exists and is not empty; export into a new directory");
  const std::vector<AgentRoleSpec> roles = load_roles(ckb_dir / "roles");
  if (roles.empty()) fail((ckb_dir / "roles").string(), ": no role files to export");

  std::string role_list;
  for (const auto& r : roles) role_list += "- `" + r.id + "`: " + r.title + " (references/roles/" + r.id + ".md)\n";

  const std::string skill_md = std::string("---\n") + "name: " + kSkillName + "\n" +
      "description: Generate a compact, verified single-path LLM inference engine from deployment constraints (checkpoint, "
      "platform, dtype, runtime limits) with the metainfer toolkit, and evolve its contract knowledge base when coverage "
      "fails. Use when asked to build, regenerate or extend an inference engine for a model or platform with metainfer.\n" +
      "metadata:\n  ckb: " + fs::absolute(ckb_dir).string() + "\n  generator: metainfer skill export\n" +
      "---\n\n"
      "# metainfer: constraints in, a verified inference engine out\n\n"
      "metainfer turns deployment constraints into a standalone C++ engine and accepts it only when its gates pass. "
      "Every decision that matters is made by `metainfer` itself through the scripts in `scripts/`: coverage, "
      "generation, the gates, lint. You orchestrate; you never judge.\n\n"
      "## Rules\n\n"
      "1. Only the gates decide. `scripts/verify.sh` (the gate runner) is the only thing that may declare PASS or FAIL; "
      "no role, and not you, claims that a stage passes.\n"
      "2. Separate roles. Run each role in `references/roles/` as its own sub-agent with only the tools and write paths "
      "its file lists; roles share nothing but files in the run directory.\n"
      "3. Source switch off by default. No role reads vLLM, SGLang, llama.cpp or transformers sources. Only the explorer, "
      "and only when the user switches references on, may read a reference tree, and every such read must be recorded.\n"
      "4. Test contracts are out of reach. Before implementers act, run `scripts/protect.sh RUN_DIR`; before every gate, "
      "`scripts/check-protected.sh RUN_DIR`. A failure there ends the stage: something edited a test contract.\n"
      "5. The harness cannot enforce these rules the way `metainfer agents` does (its tool sandbox refuses and counts "
      "violations). Where your harness allows it, prefer `scripts/agents.sh`, which runs the roles through that sandbox.\n\n"
      "## Workflow\n\n"
      "1. Coverage: `scripts/coverage.sh CONSTRAINTS.toml` (or `--model DIR`). Exit 0: covered, go to 2. Exit 3: the "
      "printed gaps are what the CKB lacks, go to 3.\n"
      "2. Regular generation: `scripts/generate.sh CONSTRAINTS.toml -o ENGINE_DIR`. It generates from the CKB, builds "
      "and runs every gate; exit 0 only at PASS_VERIFIED or PASS_VERIFIED_ORACLE. Re-run the gates with "
      "`scripts/verify.sh ENGINE_DIR`.\n"
      "3. Knowledge-base evolution, in rounds evo-NNN: the explorer writes notes on each gap; the consolidator turns them "
      "into CKB entries under a staged delta; the implementer builds a candidate against the CKB plus the delta, judged "
      "by the gates; then, with references off, regenerate from the CKB alone in a fresh directory and run the gates "
      "again; only then merge the delta with `scripts/consolidate.sh --delta RUN/ckb_delta --round evo-NNN --evidence "
      "REGEN/reports/verification.json` (it refuses a delta outside the knowledge layers or one that adds lint errors). "
      "A failure goes to the failure analyst, "
      "whose report seeds the next round. `scripts/agents.sh evolve --constraints CONSTRAINTS.toml --work-dir W "
      "--contracts DIR ...` runs all of this itself.\n"
      "4. Strategy and summary: the orchestrator writes `strategy/strategy.md` before the other roles start (they read it "
      "first); when the run is over, the experiment summariser writes `experiment/summary.md` from the figures you "
      "measured (never from the agents' own account) and names the experience worth an entry.\n\n"
      "## Roles\n\n" + role_list +
      "\n## Scripts\n\n"
      "Each calls `metainfer` (`$METAINFER`, else the binary this skill was exported from): `coverage.sh`, "
      "`generate.sh`, `verify.sh`, `ckb-check.sh`, `protect.sh`, `check-protected.sh`, `consolidate.sh`, `agents.sh`.\n";
  write_file(root / "SKILL.md", skill_md);

  for (const auto& r : roles) write_file(root / "references" / "roles" / (r.id + ".md"), role_reference(r));

  const fs::path bin = metainfer_binary;
  // Each script: file, what it is for, its usage line, the command it runs.
  struct Script {
    const char *file, *purpose, *usage, *command;
  };
  const Script scripts[] = {
      {"coverage.sh", "Coverage detection: exit 0 covered, 3 not covered (the gaps are printed).",
       "coverage.sh [CONSTRAINTS.toml] [--model DIR] [--json]", "exec \"$METAINFER\" plan \"$@\""},
      {"generate.sh", "Generate, build and gate an engine from the CKB (exit 0 only when verified).",
       "generate.sh CONSTRAINTS.toml -o ENGINE_DIR [flags]", "exec \"$METAINFER\" generate \"$@\""},
      {"verify.sh", "The gate runner: the only judge of PASS or FAIL.", "verify.sh ENGINE_DIR [--only GATE] [--json]",
       "exec \"$METAINFER\" verify \"$@\""},
      {"ckb-check.sh", "Lint the CKB (a staged delta must not add errors).", "ckb-check.sh [--ckb DIR]",
       "exec \"$METAINFER\" ckb check \"$@\""},
      {"protect.sh", "Hash the run directory's test contracts and gate scripts (before any implementer acts).",
       "protect.sh RUN_DIR", "exec \"$METAINFER\" agents protect --run-dir \"$1\""},
      {"check-protected.sh", "Before every gate: fail if a protected file changed since protect.sh.",
       "check-protected.sh RUN_DIR", "exec \"$METAINFER\" agents protect --run-dir \"$1\" --check"},
      {"consolidate.sh",
       "Merge a staged CKB delta into the CKB, only after the SWITCH=OFF regeneration passed its gates (knowledge layers "
       "only, no new lint error; each file tagged with the round and the evidence).",
       "consolidate.sh --delta RUN/ckb_delta --round evo-NNN --evidence REGEN/reports/verification.json [--ckb DIR]",
       "exec \"$METAINFER\" agents consolidate \"$@\""},
      {"agents.sh", "The roles run by metainfer's own orchestrator and tool sandbox.",
       "agents.sh converse|stage|evolve [flags]", "exec \"$METAINFER\" agents \"$@\""},
  };
  for (const Script& sc : scripts)
    write_file(root / "scripts" / sc.file, script(sc.purpose, sc.usage, sc.command, bin), true);
  return root;
}

}  // namespace mi::agents
