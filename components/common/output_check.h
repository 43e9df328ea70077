// Standard output that cannot be written is an error, never a silent exit 0 (a full disk, a closed stdout, a reader
// that went away). Used by every entry point: the generated engine (engine/engine_main.cpp) and `metainfer`.
//
//   int main() {
//     mi::prepare_standard_streams();   // SIGPIPE ignored (EPIPE instead of a silent death); closed fds 0-2 reserved
//     int status = run();
//     return mi::finish_standard_output("metainfer", status);  // flush + check: exit 1 naming "standard output"
//   }
//
// Exit status of an output failure: 1 (a runtime failure, not bad input), unless the command already failed with
// a status of its own, which is kept.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>

namespace mi {

inline constexpr int kExitOutputFailure = 1;

// Ignores SIGPIPE, and occupies any closed standard descriptor (0, 1, 2) with /dev/null opened read-only: a file
// the program opens later can then never become "standard output" by accident, and writes to a stdout that was
// closed fail with EBADF, which finish_standard_output reports.
inline void prepare_standard_streams() {
  std::signal(SIGPIPE, SIG_IGN);
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int opened = ::open("/dev/null", O_RDONLY);
    if (opened >= 0 && opened != fd) {  // lower descriptors were free: move it where it belongs
      ::dup2(opened, fd);
      ::close(opened);
    }
  }
}

// Why writes to standard output fail, found without writing anything: a zero-byte write reports a descriptor that
// is closed (EBADF) or a full device (ENOSPC); a pipe whose reader is gone polls as POLLERR (EPIPE). 0 if unknown.
inline int probe_standard_output() {
  if (::write(STDOUT_FILENO, "", 0) < 0) return errno;
  struct pollfd p {};
  p.fd = STDOUT_FILENO;
  p.events = POLLOUT;
  if (::poll(&p, 1, 0) == 1 && (p.revents & POLLERR)) return EPIPE;
  return 0;
}

// Flushes std::cout and stdout. Returns "" when everything written so far reached the descriptor, else the reason
// ("No space left on device", "Bad file descriptor", "Broken pipe", or "write failed").
inline std::string flush_standard_output() {
  errno = 0;
  bool failed = false;
  int error = 0;
  std::cout.flush();
  if (std::cout.fail()) failed = true, error = errno;
  errno = 0;
  if (std::fflush(stdout) != 0) failed = true, error = error ? error : errno;
  if (std::ferror(stdout)) failed = true;
  if (!failed) return "";
  if (!error) error = probe_standard_output();  // the failing write's errno is gone by now
  return error ? std::string(std::strerror(error)) : std::string("write failed");
}

// The end of main: flushes standard output and checks that every write reached it. On failure prints one line
// "<program>: error: cannot write to standard output: <reason>" on stderr and returns kExitOutputFailure (or
// `status` when that already says the command failed).
inline int finish_standard_output(const char* program, int status) {
  const std::string reason = flush_standard_output();
  if (reason.empty()) return status;
  std::cerr << program << ": error: cannot write to standard output: " << reason << "\n" << std::flush;
  return status != 0 ? status : kExitOutputFailure;
}

}  // namespace mi
