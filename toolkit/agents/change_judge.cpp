#include "agents/change_judge.h"

#include "agents/command_journal.h"
#include "agents/command_paths.h"
#include "agents/path_glob.h"
#include "agents/protected_files.h"
#include "agents/signature_files.h"
#include "agents/source_switch.h"

namespace mi::agents {
namespace fs = std::filesystem;

std::optional<ChangeRule> link_rule(const fs::path& run_dir, const FileChange& c) {
  if (!c.after) return std::nullopt;
  if (!c.after->symlink) {
    // A new name for a file (`ln a b`): writing either would change the other, whatever the write rules of its path.
    if (c.after->links > 1 && (!c.before || c.before->symlink || c.after->links > c.before->links))
      return ChangeRule{"hard_link", c.path + " was given another name (a hard link); files in the run directory have one name each"};
    return std::nullopt;
  }
  // A symlink is judged by where it leads (its whole chain, as the host sees it): only somewhere inside the run
  // directory that is not protected. Outside it (the CKB, a reference tree, the repository a gate mounts), it would
  // bring in what the run directory does not hold (a withheld source, say) or lead a later write out of it.
  std::error_code ec;
  const fs::path link = run_dir / c.path;
  fs::path target = c.after->bytes;
  if (target.is_relative()) target = link.parent_path() / target;
  const fs::path resolved = fs::weakly_canonical(target, ec);
  if (ec) return ChangeRule{"symlink", c.path + " -> " + c.after->bytes + " cannot be resolved (" + ec.message() + ")"};
  if (!path_within(resolved, run_dir)) return ChangeRule{"symlink", c.path + " -> " + c.after->bytes + " leads outside the run directory"};
  const std::string rel = resolved.lexically_relative(run_dir).generic_string();
  if (path_glob_any(default_protected_globs(), rel) || path_glob_any(workflow_record_globs(), rel))
    return ChangeRule{"symlink", c.path + " -> " + c.after->bytes + " leads to " + rel + ", a protected path"};
  return std::nullopt;
}

std::string JudgedChange::undo_note(const std::string& what) const {
  return undone ? "the " + what + "'s change was undone" : "the " + what + "'s change could NOT be undone (its earlier content was not kept)";
}

std::vector<JudgedChange> judge_run_dir_changes(const fs::path& run_dir, const RunDirSnapshot& before, bool git_existed,
                                                const ChangeJudgement& judgement) {
  const std::string journal = command_journal_path(run_dir).lexically_relative(run_dir).generic_string();
  std::vector<JudgedChange> out;
  for (FileChange& c : changed_files(before, snapshot_run_dir(run_dir, git_existed))) {
    if (c.path == journal || c.path == journal + ".tmp") continue;  // the judge's own
    if (judgement.skip_records && path_glob_any(workflow_record_globs(), c.path)) continue;
    JudgedChange j{std::move(c), std::nullopt, false};
    const FileChange& ch = j.change;
    if (!ch.scratch() && judgement.write_rule) j.refused = judgement.write_rule(ch.path);
    if (!j.refused) j.refused = link_rule(run_dir, ch);
    if (!j.refused && judgement.check_signatures && ch.after && !ch.after->symlink)
      if (const auto sig = ch.after->fingerprint ? find_foreign_signature_in_file(run_dir / ch.path) : find_foreign_signature(ch.after->bytes))
        j.refused = ChangeRule{"foreign_signature", ch.path + " would carry a " + sig->framework + " source signature (\"" + sig->marker + "\")"};
    if (j.refused) j.undone = undo_change(run_dir, ch);
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<fs::path> unrestorable_paths(const fs::path& run_dir, const RunDirSnapshot& before, bool git_existed) {
  std::vector<fs::path> out;
  if (git_existed) out.push_back(run_dir / ".git");
  for (const auto& f : large_files(run_dir, before)) out.push_back(f);
  return out;
}

}  // namespace mi::agents
