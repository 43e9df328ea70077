#include "process/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <sstream>

#include "common/error.h"

extern char** environ;

namespace mi::process {
namespace {
// Closes every fd >= first in a forked child (async-signal-safe: close_range, else close() up to the fd limit).
void close_open_files_from(int first) {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, (unsigned)first, ~0U, 0U) == 0) return;
#endif
  struct rlimit limit {};
  const long max_fd = getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY ? long(limit.rlim_cur) : 65536;
  for (long fd = first; fd < max_fd && fd < (1L << 20); ++fd) close(int(fd));
}
}  // namespace

int spawn(const std::vector<std::string>& argv, const RunOptions& options, int in_fd, int out_fd, int err_fd) {
  if (argv.empty()) fail("run: empty command");
  std::vector<std::string> env_strings;
  for (char** e = environ; !options.clear_env && *e; ++e) {
    const std::string kv = *e;
    if (!options.env.count(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  const pid_t pid = fork();
  if (pid < 0) fail("run: fork failed: ", std::strerror(errno));
  if (pid == 0) {
    setpgid(0, 0);  // own process group, so a timeout kills the child's children too
    dup2(in_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    // Nothing but stdin/stdout/stderr crosses into the child: an fd the parent holds open (a transcript stream, a
    // log, a socket) opened without O_CLOEXEC would otherwise let the command write into it (found by review: an
    // agent's command could append events to its own transcript past the read-only mount).
    close_open_files_from(3);
    if (!options.cwd.empty() && chdir(options.cwd.c_str()) != 0) _exit(126);
    execvpe(args[0], args.data(), envp.data());
    const std::string msg = std::string("exec failed: ") + args[0] + ": " + std::strerror(errno) + "\n";
    (void)!write(2, msg.data(), msg.size());
    _exit(127);
  }
  setpgid(pid, pid);
  return pid;
}

void feed_stdin(int fd, const std::string& data) {
  if (!data.empty()) {
    signal(SIGPIPE, SIG_IGN);
    std::size_t written = 0;
    while (written < data.size()) {
      const ssize_t n = write(fd, data.data() + written, data.size() - written);
      if (n <= 0) break;
      written += std::size_t(n);
    }
  }
  close(fd);
}

void reap(int pid, RunResult& result, std::chrono::steady_clock::time_point start) {
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  result.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.peak_rss_kb = usage.ru_maxrss;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) result.exit_code = 128 + WTERMSIG(status);
}

RunResult run(const std::vector<std::string>& argv, const RunOptions& options) {
  if (argv.empty()) fail("run: empty command");
  RunResult result;
  for (const auto& a : argv) result.command += (result.command.empty() ? "" : " ") + a;

  int out_pipe[2], err_pipe[2], in_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) || pipe2(err_pipe, O_CLOEXEC) || pipe2(in_pipe, O_CLOEXEC))
    fail("run: pipe failed: ", std::strerror(errno));

  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = spawn(argv, options, in_pipe[0], out_pipe[1], options.merge_stderr ? out_pipe[1] : err_pipe[1]);
  close(out_pipe[1]);
  close(err_pipe[1]);
  close(in_pipe[0]);
  feed_stdin(in_pipe[1], options.stdin_data);
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buffer[65536];
  while (open_fds > 0) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options.timeout_s) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    const int ready = poll(fds, 2, 100);
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof buffer);
      if (n > 0) {
        (i == 0 ? result.out : result.err).append(buffer, std::size_t(n));
      } else {
        close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  reap(pid, result, start);
  return result;
}

nlohmann::json last_json_line(const std::string& output) {
  std::string last;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return nlohmann::json::parse(last);
}

std::string tail(const std::string& text, std::size_t max_chars) {
  if (text.size() <= max_chars) return text;
  return "[... " + std::to_string(text.size() - max_chars) + " characters cut ...]\n" + text.substr(text.size() - max_chars);
}

}  // namespace mi::process
