#include "agents/command_audit.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>

#include "agents/command_paths.h"
#include "agents/protected_files.h"
#include "process/strace_line.h"
#include "process/subprocess.h"

namespace mi::agents {
namespace fs = std::filesystem;

namespace {

// -e signal=none: signal lines say nothing about files. exit_group: a set-up process that exits frees its PID.
const std::vector<std::string>& strace_flags() {
  static const std::vector<std::string> flags = {"strace", "-f", "-qq", "-y", "--seccomp-bpf", "-e", "trace=%file,fchdir,exit_group",
                                                 "-e", "signal=none"};
  return flags;
}

bool is_stat_only(const std::string& call) {
  static const std::set<std::string> calls = {"stat", "lstat", "newfstatat", "fstatat64", "statx", "access", "faccessat",
                                              "faccessat2", "readlink", "readlinkat", "statfs", "getxattr", "lgetxattr",
                                              "listxattr", "llistxattr"};
  return calls.count(call) > 0;
}

// Undoes strace's quoting of a string argument (without its quotes).
std::string unescape(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'v': out += '\v'; break;
      case 'f': out += '\f'; break;
      case 'a': out += '\a'; break;
      case 'b': out += '\b'; break;
      case 'x': {
        int v = 0, n = 0;
        while (n < 2 && i + 1 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1]))) {
          v = v * 16 + std::stoi(std::string(1, s[++i]), nullptr, 16);
          ++n;
        }
        out += char(v);
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0', n = 1;
          while (n < 3 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7') {
            v = v * 8 + (s[++i] - '0');
            ++n;
          }
          out += char(v);
        } else {
          out += c;
        }
    }
  }
  return out;
}

// The top-level arguments of a call, from just after its '(' to its ')' (or the line's end: "<unfinished ...>"),
// grouping quotes, brackets, braces and strace's <...> decorations.
std::vector<std::string> split_args(const std::string& line, std::size_t start) {
  std::vector<std::string> args;
  std::string cur;
  int depth = 0;
  bool quoted = false;
  for (std::size_t i = start; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      cur += c;
      if (c == '\\' && i + 1 < line.size()) cur += line[++i];
      else if (c == '"') quoted = false;
      continue;
    }
    if (c == '"') {
      quoted = true;
      cur += c;
    } else if (c == '<' && depth == 0 && (cur == "AT_FDCWD" || (!cur.empty() && cur.find_first_not_of("-0123456789") == std::string::npos))) {
      // A descriptor's -y decoration, "3</dir>": strace escapes neither brackets nor parentheses in the path (a
      // directory named "x(" would open a level that never closes), so it runs to the '>' that ends the argument.
      std::size_t end = i + 1;
      while (end < line.size() && !(line[end] == '>' && (end + 1 == line.size() || line[end + 1] == ',' || line[end + 1] == ')'))) ++end;
      cur += line.substr(i, end - i + 1);
      i = end;
    } else if (c == '(' || c == '[' || c == '{' || c == '<') {
      ++depth;
      cur += c;
    } else if (c == ']' || c == '}' || c == '>' || (c == ')' && depth > 0)) {
      depth = std::max(0, depth - 1);
      cur += c;
    } else if (c == ')' && depth == 0) {
      break;
    } else if (c == ',' && depth == 0) {
      args.push_back(cur);
      cur.clear();
      if (i + 1 < line.size() && line[i + 1] == ' ') ++i;
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) args.push_back(cur);
  return args;
}

// A quoted string argument ("..." possibly followed by "..." for a cut one): its text.
bool string_arg(const std::string& a, std::string& text) {
  if (a.size() < 2 || a[0] != '"') return false;
  std::size_t i = 1;
  for (; i < a.size(); ++i) {
    if (a[i] == '\\') ++i;
    else if (a[i] == '"') break;
  }
  if (i >= a.size()) return false;
  text = unescape(a.substr(1, i - 1));
  return true;
}

// A descriptor argument decorated by -y: "AT_FDCWD</dir>" or "3</dir>" -> "/dir"; false for another argument.
// `known` is false when the descriptor is not a directory of the file system ("3<pipe:[1]>", no decoration).
bool fd_arg(const std::string& a, fs::path& dir, bool& known, bool& at_fdcwd) {
  const std::size_t lt = a.find('<');
  const std::string head = a.substr(0, lt);
  at_fdcwd = head == "AT_FDCWD";
  if (!at_fdcwd && (head.empty() || head.find_first_not_of("-0123456789") != std::string::npos)) return false;
  known = false;
  if (lt != std::string::npos && a.back() == '>' && a.size() > lt + 2 && a[lt + 1] == '/') {
    dir = unescape(a.substr(lt + 1, a.size() - lt - 2));
    known = true;
  }
  return true;
}

fs::path strip_prefix(const fs::path& p, const fs::path& root) {
  if (root.empty()) return p;
  if (p == root) return "/";
  const fs::path rel = p.lexically_relative(root);
  if (rel.empty() || *rel.begin() == "..") return p;
  return fs::path("/") / rel;
}

fs::path normal(const fs::path& p) {
  fs::path n = p.lexically_normal();
  if (!n.has_filename() && n.has_parent_path() && n != n.root_path()) n = n.parent_path();
  return n;
}

// The root entries that are symlinks into /usr on a merged-/usr system (/lib -> usr/lib, ...), as the commands see
// them (the isolation re-creates them): name -> the components they lead to ("lib" -> {"usr", "lib"}).
const std::map<std::string, std::vector<std::string>>& root_aliases() {
  static const std::map<std::string, std::vector<std::string>> aliases = [] {
    std::map<std::string, std::vector<std::string>> m;
    for (const char* d : {"bin", "sbin", "lib", "lib32", "lib64", "libx32"}) {
      std::error_code ec;
      const fs::path link = fs::path("/") / d;
      if (!fs::is_symlink(link, ec)) continue;
      const fs::path target = fs::read_symlink(link, ec);
      if (ec) continue;
      for (const auto& part : (target.is_absolute() ? target : fs::path("/") / target).lexically_normal().relative_path())
        if (!part.empty()) m[d].push_back(part.string());
    }
    return m;
  }();
  return aliases;
}

enum class MagicLink { none, descriptor, root, cwd };

// Whether the components so far name one of procfs' or /dev's magic links: /proc/<self|thread-self|pid>[/task/<tid>]
// /{fd/N, root, cwd}, /dev/fd/N, /dev/std{in,out,err}.
MagicLink magic_link(const std::vector<std::string>& c) {
  const auto number = [](const std::string& x) { return !x.empty() && x.find_first_not_of("0123456789") == std::string::npos; };
  if (c.size() == 3 && c[0] == "dev" && c[1] == "fd" && number(c[2])) return MagicLink::descriptor;
  if (c.size() == 2 && c[0] == "dev" && (c[1] == "stdin" || c[1] == "stdout" || c[1] == "stderr")) return MagicLink::descriptor;
  if (c.size() < 3 || c[0] != "proc" || !(c[1] == "self" || c[1] == "thread-self" || number(c[1]))) return MagicLink::none;
  std::size_t at = 2;
  if (c.size() >= 5 && c[2] == "task" && number(c[3])) at = 4;  // /proc/<pid>/task/<tid>/...
  if (c.size() == at + 2 && c[at] == "fd" && number(c[at + 1])) return MagicLink::descriptor;
  if (c.size() == at + 1 && c[at] == "root") return MagicLink::root;
  if (c.size() == at + 1 && c[at] == "cwd") return MagicLink::cwd;
  return MagicLink::none;
}

// An absolute path as the kernel resolves it through the links the audit can follow, component by component, so that
// a ".." after a link applies to where the link leads (as the kernel does), not to its name: /proc/self/root and
// /proc/self/cwd (and a task's) lead to "/" and to the process's working directory `cwd`, and the merged-/usr links
// (/lib -> /usr/lib) to their /usr directories. Empty when the path goes on past an open descriptor's link
// (/proc/self/fd/3/x, /dev/fd/3/.., /dev/stdin/x): the log does not say where that leads. Otherwise lexically normal.
std::optional<fs::path> resolve_links(const fs::path& raw, const fs::path& cwd) {
  std::vector<std::string> c;
  const auto parts = [](const fs::path& p) {
    std::vector<std::string> out;
    for (const auto& part : p.relative_path()) out.push_back(part.string());
    return out;
  };
  std::vector<std::string> rest = parts(raw);
  for (std::size_t i = 0; i < rest.size(); ++i) {
    const std::string& x = rest[i];
    if (x.empty() || x == ".") continue;
    if (x == "..") {
      if (!c.empty()) c.pop_back();
      continue;
    }
    c.push_back(x);
    if (c.size() == 1) {
      const auto a = root_aliases().find(c[0]);
      if (a != root_aliases().end()) c = a->second;
    }
    switch (magic_link(c)) {
      case MagicLink::none: break;
      case MagicLink::descriptor:
        if (i + 1 < rest.size()) return std::nullopt;  // on past the descriptor
        break;                                          // the descriptor itself (/dev/fd/63, /dev/stdin)
      case MagicLink::root: c.clear(); break;
      case MagicLink::cwd: c = parts(cwd); break;
    }
  }
  fs::path out = "/";
  for (const auto& x : c) out /= x;
  return out;
}

// kUnresolvedDescriptor/<the path as named, ".." spelt "dotdot">: an access past a descriptor, kept inside the
// sentinel directory whatever its "..".
fs::path unresolved_access(const fs::path& raw) {
  fs::path out = kUnresolvedDescriptor;
  for (const auto& part : raw.relative_path()) out /= part == ".." ? fs::path("dotdot") : part;
  return out;
}

}  // namespace

bool command_audit_available() {
  const char* env = std::getenv("METAINFER_AGENT_AUDIT");
  if (env && std::string(env) == "off") return false;
  static const bool ok = [] {
    std::vector<std::string> argv = strace_flags();
    argv.insert(argv.end(), {"-o", "/dev/null", "/bin/true"});
    const process::RunResult r = process::run(argv, {.timeout_s = 30, .merge_stderr = true});
    return !r.timed_out && r.exit_code == 0;
  }();
  return ok;
}

std::vector<std::string> command_audit_prefix(const fs::path& log) {
  std::vector<std::string> argv = strace_flags();
  argv.insert(argv.end(), {"-o", log.string()});
  return argv;
}

std::vector<FileAccess> audited_accesses(std::istream& log, const std::string& tag, const fs::path& cwd, const fs::path& root_prefix,
                                         const std::vector<fs::path>* only_within) {
  std::vector<FileAccess> out;
  std::set<long> setup;          // processes seen before the tagged execve: the isolation's own
  std::map<long, fs::path> cwds; // each process's working directory, as its AT_FDCWD decorations show it
  long tagged = 0;
  bool tagged_own = false;       // the tagged process still runs the program of the tagged execve
  for (std::string line; std::getline(log, line);) {
    const std::optional<process::StraceLine> parsed = process::parse_strace_line(line);
    if (!parsed) continue;
    const long pid = parsed->pid;
    const std::size_t name_start = line.size() - parsed->rest.size();
    if (line.compare(name_start, 5, "<... ") == 0) continue;  // a call resumed: its path was on its first line
    const std::size_t open = line.find('(', name_start);
    if (open == std::string::npos) continue;
    const std::string call = line.substr(name_start, open - name_start);
    if (!tagged) {
      if (call == "execve" && line.find(tag, open) != std::string::npos) {
        tagged = pid;
        tagged_own = true;
        setup.erase(pid);
        continue;  // the command's shell itself
      } else {
        setup.insert(pid);
        continue;
      }
    }
    if (setup.count(pid)) {
      if (call == "exit_group") setup.erase(pid);  // its PID may be reused by a process of the command
      continue;
    }
    if (call == "exit_group" && pid == tagged) tagged_own = false;  // its PID may be reused
    if (call == "exit_group" || call == "getcwd") continue;
    const bool by_tagged = tagged_own && pid == tagged;
    if (by_tagged && call == "execve") tagged_own = false;  // it runs another program from here on
    const std::vector<std::string> args = split_args(line, open + 1);
    fs::path& here = cwds.try_emplace(pid, cwd).first->second;
    const bool succeeded = line.size() >= 4 && line.compare(line.size() - 4, 4, " = 0") == 0;
    std::optional<fs::path> next_cwd;  // where a successful chdir leads
    // Where each relative path of this call is resolved: a decorated descriptor before it, or the working directory.
    auto add = [&](const std::string& call_name, const fs::path& base, const std::string& text, bool walk) {
      if (text.empty()) return;  // AT_EMPTY_PATH: the descriptor itself
      const fs::path raw = fs::path(text).is_absolute() ? fs::path(text) : base / text;
      const std::optional<fs::path> resolved = resolve_links(raw, here);
      if (!resolved) {  // past an open descriptor: counts, wherever it leads (classify_hidden_paths)
        out.push_back({call_name, unresolved_access(raw), false, false, by_tagged});
        return;
      }
      const fs::path p = normal(*resolved);
      if (call_name == "chdir" && succeeded) next_cwd = p;
      if (only_within && std::none_of(only_within->begin(), only_within->end(), [&](const fs::path& h) { return path_within(p, h); }))
        return;
      out.push_back({call_name, p, walk && text.find('/') == std::string::npos, is_stat_only(call_name), by_tagged});
    };
    if (call == "fchdir") {
      fs::path dir;
      bool known = false, at = false;
      if (!args.empty() && fd_arg(args[0], dir, known, at) && known && succeeded) here = normal(strip_prefix(dir, root_prefix));
      continue;
    }
    if (call == "symlink" || call == "symlinkat") {
      // symlink(TARGET, LINK) / symlinkat(TARGET, DIRFD, LINK): the link is a path the call names; where it leads is
      // judged as a target, resolved against the link's directory.
      std::string target, link;
      fs::path base = here, dir;
      bool known = true, at = false;
      if (args.size() >= 2 && call == "symlink" && string_arg(args[0], target) && string_arg(args[1], link)) {
      } else if (args.size() >= 3 && call == "symlinkat" && string_arg(args[0], target) && fd_arg(args[1], dir, known, at) &&
                 string_arg(args[2], link)) {
        if (!known) continue;
        base = strip_prefix(dir, root_prefix);
      } else {
        continue;
      }
      add(call, base, link, false);
      const fs::path link_path = fs::path(link).is_absolute() ? fs::path(link) : base / link;
      add("symlink-target", link_path.parent_path(), target, false);
      continue;
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
      fs::path dir;
      bool known = false, at = false;
      std::string text;
      if (fd_arg(args[i], dir, known, at) && i + 1 < args.size() && string_arg(args[i + 1], text)) {
        if (at && known) here = normal(strip_prefix(dir, root_prefix));  // the working directory, as the kernel has it
        if (known) add(call, at ? here : normal(strip_prefix(dir, root_prefix)), text, !at);
        ++i;
        continue;
      }
      // A path without a descriptor: the first argument (open, stat, execve, chdir...), and the second of the calls
      // that name two (rename, link). Other strings (readlink's buffer, getxattr's name) are no paths.
      const bool path_position = i == 0 || (i == 1 && (call == "rename" || call == "link"));
      if (path_position && string_arg(args[i], text)) add(call, here, text, false);
    }
    if (next_cwd) here = *next_cwd;
  }
  return out;
}

std::vector<ReachedHiddenPath> reached_hidden_paths(const std::vector<FileAccess>& accesses, const std::vector<HiddenPath>& hidden,
                                                    const std::string& command, const fs::path& cwd) {
  constexpr std::size_t kShown = 3;
  std::vector<ReachedHiddenPath> out;
  std::map<std::size_t, std::size_t> at;  // hidden index -> position in out
  std::map<std::size_t, bool> explained;   // hidden file index -> a wildcard of the command could name it
  for (const FileAccess& a : accesses)
    for (std::size_t k = 0; k < hidden.size(); ++k) {
      const HiddenPath& h = hidden[k];
      bool counts = false;
      if (a.call == "symlink-target") {
        counts = path_within(a.path, h.path);
      } else if (h.directory) {
        counts = a.path != h.path && path_within(a.path, h.path);
      } else if (a.path == h.path && !a.stat_only && !a.walk) {
        const auto e = explained.find(k);
        const bool by_wildcard = e != explained.end() ? e->second : (explained[k] = wildcard_may_name(command, cwd, h.path));
        counts = !by_wildcard;
      }
      if (!counts) continue;
      auto [it, fresh] = at.try_emplace(k, out.size());
      if (fresh) out.push_back({k, {}});
      if (out[it->second].accesses.size() < kShown) out[it->second].accesses.push_back(a);
    }
  std::sort(out.begin(), out.end(), [](const ReachedHiddenPath& a, const ReachedHiddenPath& b) { return a.hidden < b.hidden; });
  return out;
}

std::vector<HiddenPath> classify_hidden_paths(const std::vector<fs::path>& hidden, const fs::path& run_dir,
                                              const std::vector<fs::path>& references,
                                              const std::vector<std::pair<fs::path, std::string>>& foreign) {
  std::vector<HiddenPath> out;
  std::error_code ec;
  for (const fs::path& h : hidden) {
    HiddenPath p{h, !fs::is_regular_file(h, ec), "", ""};
    const auto f = std::find_if(foreign.begin(), foreign.end(), [&](const auto& x) { return x.first == h; });
    const std::string rel = path_within(h, run_dir) ? h.lexically_relative(run_dir).generic_string() : "";
    if (std::find(references.begin(), references.end(), h) != references.end()) {
      p.rule = "reference_path";
      p.shown = h.string() + ", a reference source tree";
    } else if (f != foreign.end()) {
      p.rule = "foreign_signature";
      p.shown = f->second;
    } else if (!rel.empty() && is_hidden_record(rel)) {
      p.rule = "workflow_record";
      p.shown = rel + ", a record of the workflow (transcripts, logs, metrics)";
    } else {
      p.rule = "reference_path";
      p.shown = h.string() + ", foreign framework sources installed on this system (system_references.h)";
    }
    out.push_back(p);
  }
  out.push_back({kUnresolvedDescriptor, true, "reference_path",
                 "a path through an open descriptor (/proc/self/fd/N/..., /dev/fd/N/...), which the audit cannot resolve, "
                 "so it counts as a reach for a hidden path"});
  return out;
}

std::string violation_path(const HiddenPath& hidden, const fs::path& run_dir) {
  return path_within(hidden.path, run_dir) ? hidden.path.lexically_relative(run_dir).generic_string() : hidden.path.string();
}

std::string describe_accesses(const std::vector<FileAccess>& accesses) {
  std::string how;
  for (const FileAccess& a : accesses) how += (how.empty() ? "" : ", ") + a.call + " " + a.path.string();
  return how;
}

std::string program_audit_tag(const fs::path& program) {
  const std::string s = program.string();
  if (s.empty() || s.front() != '/') return "";
  for (const char c : s)
    if (c < 0x20 || c > 0x7e || c == '"' || c == '\\') return "";
  return "(\"" + s + "\", [";
}

}  // namespace mi::agents
