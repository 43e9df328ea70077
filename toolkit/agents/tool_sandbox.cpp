#include "agents/tool_sandbox.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/change_judge.h"
#include "agents/command_audit.h"
#include "agents/command_journal.h"
#include "agents/command_paths.h"
#include "agents/gate_watch.h"
#include "agents/isolated_command.h"
#include "agents/line_delta.h"
#include "agents/path_glob.h"
#include "agents/protected_files.h"
#include "agents/run_dir_snapshot.h"
#include "agents/signature_files.h"
#include "agents/system_references.h"
#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kCkbPrefix = "@ckb";
constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t(64) << 20;

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool has_string(const json& a, const char* key) { return a.is_object() && a.contains(key) && a[key].is_string(); }

ToolOutcome error(std::string message) { return {false, false, std::move(message)}; }

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  return s;
}

void append_jsonl(const fs::path& file, const json& record) {
  fs::create_directories(file.parent_path());
  std::ofstream(file, std::ios::app) << record.dump() << "\n";
}

// Replaces the content of the file at `path` without following a symlink in its last component (O_NOFOLLOW) and
// without writing through a hard link: a file with more than one name is another file's content too. Returns "" on
// success, "symlink" / "hard_link" for a refusal, or "error: <why>".
std::string write_no_follow(const fs::path& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
  if (fd < 0) return errno == ELOOP ? "symlink" : "error: " + std::string(std::strerror(errno));
  struct stat st {};
  std::string result;
  if (::fstat(fd, &st) != 0) result = "error: " + std::string(std::strerror(errno));
  else if (!S_ISREG(st.st_mode)) result = "error: not a regular file";
  else if (st.st_nlink > 1) result = "hard_link";
  else if (::ftruncate(fd, 0) != 0) result = "error: " + std::string(std::strerror(errno));
  else
    for (std::size_t done = 0; done < content.size();) {
      const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        result = "error: " + std::string(std::strerror(errno));
        break;
      }
      done += std::size_t(n);
    }
  ::close(fd);
  return result;
}

}  // namespace

ToolSandbox::ToolSandbox(SandboxConfig config) : config_(std::move(config)) {
  if (!fs::is_directory(config_.run_dir)) fail("tool sandbox: run directory ", config_.run_dir.string(), " does not exist");
  config_.run_dir = fs::canonical(config_.run_dir);
  if (!config_.ckb_dir.empty()) config_.ckb_dir = fs::weakly_canonical(config_.ckb_dir);
  for (const auto& r : config_.reference_paths) references_.push_back(fs::weakly_canonical(r));
  // A resumed run keeps counting the refusals and reference reads of its earlier sessions.
  auto load = [&](const char* name, auto&& add) {
    std::ifstream in(config_.run_dir / ".metainfer" / name);
    std::string line;
    while (std::getline(in, line)) {
      const json j = json::parse(line, nullptr, false);
      if (j.is_object()) add(j);
    }
  };
  load("violations.jsonl", [&](const json& j) {
    violations_.push_back({j.value("role", ""), j.value("tool", ""), j.value("path", ""), j.value("rule", ""), j.value("detail", "")});
  });
  load("reference_access.jsonl", [&](const json& j) {
    accesses_.push_back({j.value("role", ""), j.value("tool", ""), j.value("path", "")});
  });
  // A command whose process died before its changes were judged is judged now, before any agent acts again.
  judge_interrupted_command();
}

ToolSandbox::Resolved ToolSandbox::resolve(const std::string& text) const {
  Resolved r;
  fs::path raw;
  if (text == kCkbPrefix || text.rfind(std::string(kCkbPrefix) + "/", 0) == 0) {
    if (config_.ckb_dir.empty()) {  // no CKB: "@ckb/x" must not fall back to a path relative to our cwd
      r.shown = text;
      return r;
    }
    raw = config_.ckb_dir / text.substr(std::min(text.size(), std::string(kCkbPrefix).size() + 1));
  }
  else if (fs::path(text).is_absolute())
    raw = text;
  else
    raw = config_.run_dir / text;
  // weakly_canonical resolves every symlink of the existing prefix, so a link inside the run directory that
  // points elsewhere is classified by where it points.
  std::error_code ec;
  r.path = fs::weakly_canonical(raw, ec);
  if (ec) r.path = raw.lexically_normal();
  for (const auto& ref : references_)
    if (path_within(r.path, ref)) {
      r.area = Area::reference;
      r.shown = r.path.string();
      return r;
    }
  if (path_within(r.path, config_.run_dir)) {
    r.area = Area::run;
    r.shown = r.path == config_.run_dir ? "." : r.path.lexically_relative(config_.run_dir).generic_string();
  } else if (!config_.ckb_dir.empty() && path_within(r.path, config_.ckb_dir)) {
    r.area = Area::ckb;
    r.shown = std::string(kCkbPrefix) + (r.path == config_.ckb_dir ? "" : "/" + r.path.lexically_relative(config_.ckb_dir).generic_string());
  } else {
    r.area = Area::outside;
    r.shown = text;
  }
  return r;
}

ToolOutcome ToolSandbox::refuse(const AgentRoleSpec& role, const std::string& tool, const std::string& path,
                                const std::string& rule, const std::string& detail) {
  record_violation({role.id, tool, path, rule, detail});
  return {false, true, "refused (" + rule + "): " + detail};
}

void ToolSandbox::record_violation(const Violation& v) {
  violations_.push_back(v);
  append_jsonl(config_.run_dir / ".metainfer" / "violations.jsonl",
               {{"role", v.role}, {"tool", v.tool}, {"path", v.path}, {"rule", v.rule}, {"detail", v.detail}});
}

bool ToolSandbox::may_read(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, ToolOutcome& out) {
  switch (r.area) {
    case Area::run:
      // The workflow's records hold every role's tool results (the explorer's reference reads among them): no role
      // reads them, whatever the switch (protected_files.h).
      if (is_hidden_record(r.shown)) {
        out = refuse(role, tool, r.shown, "workflow_record",
                     r.shown + " is a record of the workflow (transcripts, logs, metrics); no agent may read it. Roles "
                               "communicate through their own files (strategy/, exploration/, review/, failure/, ckb_delta/) and the gate reports under reports/");
        return false;
      }
      return true;
    case Area::ckb:
      return true;
    case Area::outside:
      out = refuse(role, tool, r.shown, "path_escape", r.shown + " is outside the run directory and the CKB");
      return false;
    case Area::reference:
      if (config_.source_switch == SourceSwitch::on && role.id == kReferenceReaderRole) {
        log_access(role, tool, r);
        return true;
      }
      out = refuse(role, tool, r.shown, "reference_path",
                   r.shown + " is a reference source tree (source switch " + to_string(config_.source_switch) +
                       (config_.source_switch == SourceSwitch::on ? "; only the explorer may read it)" : ")"));
      return false;
  }
  return false;
}

void ToolSandbox::log_access(const AgentRoleSpec& role, const std::string& tool, const Resolved& r) {
  accesses_.push_back({role.id, tool, r.path.string()});
  append_jsonl(config_.run_dir / ".metainfer" / "reference_access.jsonl", {{"role", role.id}, {"tool", tool}, {"path", r.path.string()}});
}

bool ToolSandbox::clean_content(const AgentRoleSpec& role, const std::string& tool, const Resolved& r,
                                std::string_view text, ToolOutcome& out) {
  // A reference read the explorer is allowed under SWITCH=ON is logged, not filtered.
  if (r.area == Area::reference && config_.source_switch == SourceSwitch::on && role.id == kReferenceReaderRole) return true;
  const auto sig = find_foreign_signature(text);
  if (!sig) return true;
  if (config_.source_switch == SourceSwitch::on && role.id == kReferenceReaderRole) {
    log_access(role, tool, r);
    return true;
  }
  out = refuse(role, tool, r.shown, "foreign_signature",
               r.shown + " carries a " + sig->framework + " source signature (\"" + sig->marker + "\")");
  return false;
}

bool ToolSandbox::may_write(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, ToolOutcome& out) {
  if (r.area == Area::reference) {
    out = refuse(role, tool, r.shown, "reference_path", r.shown + " is a reference source tree");
    return false;
  }
  if (r.area == Area::ckb) {
    out = refuse(role, tool, r.shown, "write_not_granted", "the CKB is read-only; stage changes under ckb_delta/ in the run directory");
    return false;
  }
  if (r.area == Area::outside) {
    out = refuse(role, tool, r.shown, "path_escape", r.shown + " is outside the run directory");
    return false;
  }
  if (const auto rule = write_rule(role, r.shown)) {
    out = refuse(role, tool, r.shown, rule->first, rule->second);
    return false;
  }
  return true;
}

bool ToolSandbox::may_write_through_links(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, ToolOutcome& out) {
  // resolve() followed every symlink of the existing prefix; what is left to be a link is a dangling one (its
  // target absent, so weakly_canonical kept it as a name), and writing would follow it wherever it points.
  fs::path at = config_.run_dir;
  std::error_code ec;
  for (const auto& part : r.path.lexically_relative(config_.run_dir)) {
    at /= part;
    const fs::file_status st = fs::symlink_status(at, ec);
    if (fs::is_symlink(st)) {
      out = refuse(role, tool, r.shown, "symlink", at.lexically_relative(config_.run_dir).generic_string() +
                                                      " is a symlink; no tool writes through one");
      return false;
    }
    if (!fs::exists(st)) break;
  }
  // A file with another name (a hard link) is that file too: writing it would change what the other name shows,
  // which may be a path this role may not write (a staged CKB delta, a test contract).
  if (fs::is_regular_file(fs::symlink_status(r.path, ec)) && fs::hard_link_count(r.path, ec) > 1 && !ec) {
    out = refuse(role, tool, r.shown, "hard_link", r.shown + " has another name (a hard link); no tool writes through one");
    return false;
  }
  return true;
}

ToolOutcome ToolSandbox::write_content(const AgentRoleSpec& role, const std::string& tool, const Resolved& r, const std::string& content) {
  const std::string why = write_no_follow(r.path, content);
  if (why == "symlink") return refuse(role, tool, r.shown, "symlink", r.shown + " is a symlink; no tool writes through one");
  if (why == "hard_link") return refuse(role, tool, r.shown, "hard_link", r.shown + " has another name (a hard link); no tool writes through one");
  if (!why.empty()) return error(r.shown + ": cannot write (" + why.substr(std::string("error: ").size()) + ")");
  return {true, false, ""};
}

std::optional<std::pair<std::string, std::string>> ToolSandbox::write_rule(const AgentRoleSpec& role, const std::string& rel) const {
  if (path_glob_any(default_protected_globs(), rel) || path_glob_any(workflow_record_globs(), rel))
    return std::pair<std::string, std::string>{"protected_path", rel + " is a test contract, gate script or workflow record; no agent may change it"};
  if (!path_glob_any(role.write_paths, rel)) {
    std::string allowed;
    for (const auto& g : role.write_paths) allowed += (allowed.empty() ? "" : ", ") + g;
    return std::pair<std::string, std::string>{"write_not_granted", "role " + role.id + " may write only " + (allowed.empty() ? std::string("nothing") : allowed)};
  }
  return std::nullopt;
}

ToolOutcome ToolSandbox::call(const AgentRoleSpec& role, const std::string& tool, const json& arguments) {
  if (!role.has_tool(tool)) return refuse(role, tool, "", "tool_not_granted", "role " + role.id + " has no tool '" + tool + "'");
  if (!arguments.is_object()) return error("arguments must be a JSON object");
  try {
    if (tool == "list_dir") return list_dir(role, arguments);
    if (tool == "read_file") return read_file(role, arguments);
    if (tool == "search_ckb") return search_ckb(role, arguments);
    if (tool == "write_file") return write_file(role, arguments);
    if (tool == "edit_file") return edit_file(role, arguments);
    if (tool == "run_command") return run_command(role, arguments);
  } catch (const fs::filesystem_error& e) {
    return error(std::string("file system error: ") + e.code().message());
  } catch (const Error& e) {
    return error(e.what());
  }
  return error("unknown tool '" + tool + "'");
}

ToolOutcome ToolSandbox::list_dir(const AgentRoleSpec& role, const json& a) {
  if (!has_string(a, "path")) return error("list_dir needs a string 'path'");
  const Resolved r = resolve(a["path"]);
  ToolOutcome out;
  if (!may_read(role, "list_dir", r, out)) return out;
  if (!fs::is_directory(r.path)) return error(r.shown + ": not a directory");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(r.path)) {
    // The workflow's records are out of sight: listed, they would only invite a refused read.
    if (const Resolved entry = resolve(e.path().string()); entry.area == Area::run && is_hidden_record(entry.shown)) continue;
    names.push_back(e.path().filename().string() + (e.is_directory() ? "/" : ""));
  }
  std::sort(names.begin(), names.end());
  out = {true, false, ""};
  for (const auto& n : names) out.output += n + "\n";
  if (names.empty()) out.output = "(empty)\n";
  return out;
}

ToolOutcome ToolSandbox::read_file(const AgentRoleSpec& role, const json& a) {
  if (!has_string(a, "path")) return error("read_file needs a string 'path'");
  const Resolved r = resolve(a["path"]);
  ToolOutcome out;
  if (!may_read(role, "read_file", r, out)) return out;
  if (!fs::is_regular_file(r.path)) return error(r.shown + ": no such file");
  // Whole files are read (the signature check needs them): a giant one (a build artefact, a log) is refused.
  if (fs::file_size(r.path) > kMaxFileBytes) return error(r.shown + ": larger than " + std::to_string(kMaxFileBytes >> 20) + " MiB; not a text file to read");
  const std::string text = read_all(r.path);
  // The whole file is checked, not only the range asked for: a signature in the header marks the whole file.
  if (!clean_content(role, "read_file", r, text, out)) return out;
  const long first = a.contains("first_line") && a["first_line"].is_number_integer() ? std::max(1L, a["first_line"].get<long>()) : 1;
  const long max_lines = a.contains("max_lines") && a["max_lines"].is_number_integer() ? a["max_lines"].get<long>() : -1;
  std::string slice;
  long line = 1;
  std::size_t start = 0;
  while (start < text.size() && (max_lines < 0 || line < first + max_lines)) {
    std::size_t end = text.find('\n', start);
    end = end == std::string::npos ? text.size() : end + 1;
    if (line >= first) slice.append(text, start, end - start);
    start = end;
    ++line;
  }
  out = {true, false, slice};
  if (out.output.size() > config_.max_read_bytes) {
    out.output.resize(config_.max_read_bytes);
    out.output += "\n[... cut at " + std::to_string(config_.max_read_bytes) + " bytes; read further with first_line/max_lines]\n";
  }
  return out;
}

ToolOutcome ToolSandbox::search_ckb(const AgentRoleSpec& role, const json& a) {
  if (!has_string(a, "query") || a["query"].get<std::string>().empty()) return error("search_ckb needs a non-empty string 'query'");
  if (config_.ckb_dir.empty() || !fs::is_directory(config_.ckb_dir)) return error("no CKB configured");
  const std::string q = lower(a["query"]);
  std::vector<fs::path> files;
  for (const auto& e : fs::recursive_directory_iterator(config_.ckb_dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  ToolOutcome out{true, false, ""};
  std::size_t hits = 0;
  for (const auto& f : files) {
    const std::string text = read_all(f);
    if (lower(text).find(q) == std::string::npos) continue;
    const Resolved r = resolve(f.string());
    if (r.area == Area::run && is_hidden_record(r.shown)) continue;  // a CKB inside the run directory: records stay out of sight
    ToolOutcome refused;
    if (!may_read(role, "search_ckb", r, refused) || !clean_content(role, "search_ckb", r, text, refused)) continue;
    std::istringstream lines(text);
    std::string line;
    for (long n = 1; std::getline(lines, line); ++n) {
      if (lower(line).find(q) == std::string::npos) continue;
      if (++hits > config_.max_search_hits) {
        out.output += "[... more hits; refine the query]\n";
        return out;
      }
      out.output += r.shown + ":" + std::to_string(n) + ": " + line + "\n";
    }
  }
  if (hits == 0) out.output = "no match\n";
  return out;
}

ToolOutcome ToolSandbox::write_file(const AgentRoleSpec& role, const json& a) {
  if (!has_string(a, "path") || !has_string(a, "content")) return error("write_file needs string 'path' and 'content'");
  const Resolved r = resolve(a["path"]);
  ToolOutcome out;
  if (!may_write(role, "write_file", r, out)) return out;
  const std::string content = a["content"];
  if (config_.source_switch == SourceSwitch::off)
    if (const auto sig = find_foreign_signature(content))
      return refuse(role, "write_file", r.shown, "foreign_signature",
                    "the content carries a " + sig->framework + " source signature (\"" + sig->marker + "\")");
  if (!may_write_through_links(role, "write_file", r, out)) return out;
  if (fs::is_directory(r.path)) return error(r.shown + ": is a directory");
  const std::string before = fs::is_regular_file(r.path) ? read_all(r.path) : "";
  fs::create_directories(r.path.parent_path());
  if (const ToolOutcome w = write_content(role, "write_file", r, content); !w.ok) return w;
  const LineDelta d = line_delta(before, content);
  return {true, false, "wrote " + r.shown + " (" + std::to_string(content.size()) + " bytes, +" + std::to_string(d.added) + " -" + std::to_string(d.removed) + " lines)",
          1, d.added, d.removed};
}

ToolOutcome ToolSandbox::edit_file(const AgentRoleSpec& role, const json& a) {
  if (!has_string(a, "path") || !has_string(a, "old") || !has_string(a, "new")) return error("edit_file needs string 'path', 'old' and 'new'");
  const Resolved r = resolve(a["path"]);
  ToolOutcome out;
  if (!may_write(role, "edit_file", r, out)) return out;
  if (!may_write_through_links(role, "edit_file", r, out)) return out;
  if (!fs::is_regular_file(r.path)) return error(r.shown + ": no such file");
  if (fs::file_size(r.path) > kMaxFileBytes) return error(r.shown + ": too large to edit");
  const std::string before = read_all(r.path);
  // Editing needs the file's text: the read rules apply to it as well.
  if (!clean_content(role, "edit_file", r, before, out)) return out;
  const std::string old_text = a["old"], new_text = a["new"];
  if (old_text.empty()) return error("'old' must not be empty");
  const std::size_t at = before.find(old_text);
  if (at == std::string::npos) return error(r.shown + ": 'old' text not found");
  if (before.find(old_text, at + 1) != std::string::npos) return error(r.shown + ": 'old' text occurs more than once; include more context");
  const std::string after = before.substr(0, at) + new_text + before.substr(at + old_text.size());
  if (config_.source_switch == SourceSwitch::off)
    if (const auto sig = find_foreign_signature(after))
      return refuse(role, "edit_file", r.shown, "foreign_signature",
                    "the edit would add a " + sig->framework + " source signature (\"" + sig->marker + "\")");
  if (const ToolOutcome w = write_content(role, "edit_file", r, after); !w.ok) return w;
  const LineDelta d = line_delta(before, after);
  return {true, false, "edited " + r.shown + " (+" + std::to_string(d.added) + " -" + std::to_string(d.removed) + " lines)", 1, d.added, d.removed};
}

void ToolSandbox::judge_command_changes(const AgentRoleSpec& role, const RunDirSnapshot& before, bool git_existed,
                                        const std::string& interrupted, ToolOutcome& out, std::string& notes) {
  // What the command wrote is judged like write_file: outside the role's write paths, or (switch off) carrying a
  // foreign signature, it is undone and counted; the rest counts as edits. In the build trees writes are free of the
  // write paths and are no edits, but links and (switch off) signatures are judged there too (change_judge.h).
  ChangeJudgement judgement;
  judgement.write_rule = [&](const std::string& path) { return write_rule(role, path); };
  judgement.check_signatures = config_.source_switch == SourceSwitch::off;
  judgement.skip_records = !interrupted.empty();
  for (const JudgedChange& j : judge_run_dir_changes(config_.run_dir, before, git_existed, judgement)) {
    const FileChange& c = j.change;
    if (j.refused) {
      const std::string undone = j.undo_note("command");
      record_violation({role.id, "run_command", c.path, j.refused->first, j.refused->second + "; " + undone + interrupted});
      out.violation = true;
      out.ok = false;
      notes += "refused (" + j.refused->first + "): " + j.refused->second + "; " + undone + interrupted + "\n";
      continue;
    }
    if (c.scratch()) continue;  // a build output or a link that stays inside: allowed, and not an edit of the sources
    // A symlink (one that stays in the run directory, clear of protected paths) counts as an edit of no lines.
    // A file over 64 MiB is not text an agent writes: counted as an edit of no lines.
    const auto text = [](const std::optional<SnapshotEntry>& e) { return e && !e->symlink && !e->fingerprint ? e->bytes : std::string(); };
    const LineDelta d = line_delta(text(c.before), text(c.after));
    ++out.edits;
    out.lines_added += d.added;
    out.lines_removed += d.removed;
  }
}

void ToolSandbox::judge_interrupted_command() {
  const std::optional<CommandJournal> j = read_command_journal(config_.run_dir);
  if (!j) return;
  // A gate's run (gate_watch.h): judged by the gate's rule, nothing outside the build trees may have changed.
  if (j->gate) {
    for (const Violation& v : judge_gate_changes(config_.run_dir, j->command, j->before, j->git_existed,
                                                 " (judged when the run resumed: the process running the gate was interrupted)"))
      record_violation(v);
    clear_command_journal(config_.run_dir);
    return;
  }
  // The role's own write paths, from the CKB the run uses; without them nothing the command changed may stand.
  AgentRoleSpec role;
  role.id = j->role;
  if (!config_.ckb_dir.empty()) {
    try {
      role = find_role(config_.ckb_dir / "roles", j->role);
    } catch (const std::exception&) {
    }
  }
  ToolOutcome out;
  std::string notes;
  // Under the switch the command ran with, whatever this sandbox was opened with (an evolution opens some with it ON).
  const SourceSwitch opened_with = config_.source_switch;
  config_.source_switch = j->source_switch;
  judge_command_changes(role, j->before, j->git_existed, " (judged when the run resumed: the process running the command was interrupted)", out, notes);
  config_.source_switch = opened_with;
  clear_command_journal(config_.run_dir);
}

void ToolSandbox::judge_audited_accesses(const AgentRoleSpec& role, const std::string& command, const CommandResult& r,
                                         const std::vector<std::pair<fs::path, std::string>>& foreign, ToolOutcome& out,
                                         std::string& notes) {
  const std::vector<HiddenPath> hidden = classify_hidden_paths(r.hidden, config_.run_dir, references_, foreign);
  for (const ReachedHiddenPath& reached : reached_hidden_paths(r.accesses, hidden, command, config_.run_dir)) {
    const HiddenPath& h = hidden[reached.hidden];
    const std::string how = describe_accesses(reached.accesses);
    const std::string shown = violation_path(h, config_.run_dir);
    const std::string detail = "the command reached for " + h.shown + " (" + how + "); it is hidden from commands, so the "
                               "command found nothing there, and the attempt counts";
    record_violation({role.id, "run_command", shown, h.rule, detail});
    out.violation = true;
    out.ok = false;
    notes += "refused (" + h.rule + "): " + detail + "\n";
  }
}

ToolOutcome ToolSandbox::run_command(const AgentRoleSpec& role, const json& a) {
  if (!has_string(a, "command") || a["command"].get<std::string>().empty()) return error("run_command needs a non-empty string 'command'");
  const std::string command = a["command"];
  // Reference trees are hidden from commands, so a command cannot read them; one that names them is still an attempt
  // to, and is refused and counted like read_file's (never run). Judged by canonical paths (command_paths.h), not
  // by text. No role with run_command may read references, so this holds whatever the switch says.
  if (const auto named = named_reference_tree(command, config_.run_dir, references_))
    return refuse(role, "run_command", named->string(), "reference_path", "the command names the reference source tree " + named->string());
  // Files carrying a foreign signature are out of every command's sight, whatever the switch (no role with a shell
  // may read them: read_file refuses them to every role but the explorer, which has no shell). Naming one is an
  // attempt to read it, refused and counted like read_file's; a command that reaches one by a path the check cannot
  // see (built at run time, relative to a `cd`) cannot read it: /dev/null is mounted over it.
  std::vector<fs::path> hidden = references_;
  std::vector<std::pair<fs::path, std::string>> foreign;  // path, why
  for (const auto& [rel, sig] : run_signatures_.scan(config_.run_dir))
    foreign.push_back({config_.run_dir / rel, rel + ", which carries a " + sig.framework + " source signature (\"" + sig.marker + "\")"});
  if (!config_.ckb_dir.empty() && fs::is_directory(config_.ckb_dir))
    for (const auto& [rel, sig] : ckb_signatures_.scan(config_.ckb_dir))
      foreign.push_back({config_.ckb_dir / rel, "@ckb/" + rel + ", which carries a " + sig.framework + " source signature (\"" + sig.marker + "\")"});
  std::vector<fs::path> foreign_paths;
  for (const auto& [p, why] : foreign) foreign_paths.push_back(p);
  if (const auto named = named_reference_tree(command, config_.run_dir, foreign_paths)) {
    const auto it = std::find_if(foreign.begin(), foreign.end(), [&](const auto& f) { return f.first == *named; });
    const std::string shown = path_within(*named, config_.run_dir) ? named->lexically_relative(config_.run_dir).generic_string() : named->string();
    return refuse(role, "run_command", shown, "foreign_signature", "the command names " + it->second + "; not run");
  }
  hidden.insert(hidden.end(), foreign_paths.begin(), foreign_paths.end());
  // The workflow's records (transcripts, logs, metrics) are hidden from every command (isolated_command.h); naming
  // one is an attempt to read it, refused and counted. Only a word whose part before any wildcard lies in a record
  // names it: `grep x *` at the top of the run directory does not (the mount shows it nothing, and the audit below
  // does not count what a wildcard of the command explains).
  const std::vector<fs::path> records = hidden_record_paths(config_.run_dir);
  if (const auto named = named_reference_tree(command, config_.run_dir, records, /*wildcard_reach=*/false)) {
    const std::string shown = named->lexically_relative(config_.run_dir).generic_string();
    return refuse(role, "run_command", shown, "workflow_record",
                  "the command names " + shown + ", a record of the workflow (transcripts, logs, metrics) that no agent may "
                  "read; not run (a word that only looks like it, a search pattern say, counts too: quote it differently)");
  }
  double timeout = config_.command_timeout_s;
  if (a.contains("timeout_s") && a["timeout_s"].is_number()) timeout = std::clamp(a["timeout_s"].get<double>(), 1.0, config_.command_timeout_s);
  std::vector<fs::path> readonly;
  if (!config_.ckb_dir.empty() && fs::is_directory(config_.ckb_dir)) readonly.push_back(config_.ckb_dir);
  // Refuses (throws) without an isolation that confines the file system: the workflow's records are always there to
  // hide (the journal below goes into .metainfer/; transcripts/ holds this conversation), and with the switch OFF the
  // host's file system may hold foreign sources nobody configured. Before the snapshot, so nothing is read for
  // naught; run_isolated_command checks the same again.
  const bool must_confine = true;
  require_isolation_for(command_isolation(), must_confine);
  // A journal left by a gate or command of this process that was not judged (an exception between its run and its
  // judgement) is judged first: this command's journal would replace it.
  judge_interrupted_command();
  // .git is a scratch tree (and read-only) only when it is already there; one the command creates is judged like
  // any other path.
  std::error_code git_ec;
  const bool git_existed = fs::is_directory(fs::symlink_status(config_.run_dir / ".git", git_ec));
  const RunDirSnapshot before = snapshot_run_dir(config_.run_dir, git_existed);
  // Read-only for the command, besides the protected paths: an existing .git, whose contents the snapshot does not
  // keep, and the files over 64 MiB, whose content the snapshot does not keep and so could not restore.
  // .metainfer/ (where the journal goes) exists first, so that it is among the read-only mounts.
  fs::create_directories(config_.run_dir / ".metainfer");
  std::vector<fs::path> overlays = protected_mount_points(config_.run_dir);
  for (const auto& p : unrestorable_paths(config_.run_dir, before, git_existed)) overlays.push_back(p);
  // On disk before the command starts: if this process dies while it runs, the next sandbox on this run directory
  // judges what it changed (command_journal.h).
  write_command_journal(config_.run_dir, {role.id, command, git_existed, before, config_.source_switch});
  CommandResult r;
  try {
    r = run_isolated_command(command, config_.run_dir, readonly, timeout, config_.max_output_bytes, hidden, overlays, {}, must_confine,
                             /*audit=*/true);
  } catch (const Error&) {  // refused before it ran: nothing to judge
    clear_command_journal(config_.run_dir);
    throw;
  }
  std::string head = r.timed_out ? "timed out after " + std::to_string(int(timeout)) + " s" : "exit status " + std::to_string(r.exit_code);
  if (r.truncated) head += "; output cut to its last " + std::to_string(config_.max_output_bytes) + " bytes";
  if (!r.audited)
    head += "; file accesses not audited (no strace here): hidden paths stay hidden, but only those named in the command "
            "are counted";
  ToolOutcome out{!r.timed_out && r.exit_code == 0, false, ""};
  // Judged whether the command finished, failed or was killed at its time limit.
  std::string notes;
  judge_command_changes(role, before, git_existed, "", out, notes);
  clear_command_journal(config_.run_dir);
  // What the audit saw the command reach for among the hidden paths: an attempt the naming check above could not
  // see (a path built at run time, a symlink made on the way), refused by the mounts and counted here.
  if (r.audited) judge_audited_accesses(role, command, r, foreign, out, notes);

  // The output goes to the model: with the switch off it must not carry what read_file would refuse to hand over.
  std::string output = r.output;
  if (config_.source_switch == SourceSwitch::off)
    if (const auto sig = find_foreign_signature(output)) {
      record_violation({role.id, "run_command", "", "foreign_signature",
                        "the command's output carries a " + sig->framework + " source signature (\"" + sig->marker + "\"); withheld"});
      out.violation = true;
      out.ok = false;
      output = "[output withheld (foreign_signature): it carries a " + sig->framework + " source signature]\n";
    }
  out.output = head + "\n" + notes + output;
  return out;
}

}  // namespace mi::agents
