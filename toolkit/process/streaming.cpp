#include "process/streaming.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/error.h"

namespace mi::process {
namespace {

double realtime_s() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

}  // namespace

RunResult run_streaming(const std::vector<std::string>& argv, const OutputCallback& on_stdout, const RunOptions& options) {
  if (argv.empty()) fail("run_streaming: empty command");
  RunResult result;
  for (const auto& a : argv) result.command += (result.command.empty() ? "" : " ") + a;

  int out_sock[2], err_pipe[2], in_pipe[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, out_sock) || pipe2(err_pipe, O_CLOEXEC) || pipe2(in_pipe, O_CLOEXEC))
    fail("run_streaming: socketpair/pipe failed: ", std::strerror(errno));
  const int on = 1, sndbuf = 4 << 20;
  if (setsockopt(out_sock[0], SOL_SOCKET, SO_TIMESTAMPNS, &on, sizeof on) != 0)
    fail("run_streaming: SO_TIMESTAMPNS failed: ", std::strerror(errno));
  (void)setsockopt(out_sock[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);  // capped by the kernel; best effort

  const auto start = std::chrono::steady_clock::now();
  const double start_real = realtime_s();
  const pid_t pid = spawn(argv, options, in_pipe[0], out_sock[1], options.merge_stderr ? out_sock[1] : err_pipe[1]);
  close(out_sock[1]);
  close(err_pipe[1]);
  close(in_pipe[0]);
  feed_stdin(in_pipe[1], options.stdin_data);

  pollfd fds[2] = {{out_sock[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  static thread_local char buffer[1 << 18];  // larger than any one write of a streaming child
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec)) + 64];
  while (open_fds > 0) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (elapsed > options.timeout_s) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      break;
    }
    const int ready = poll(fds, 2, 50);
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (i == 0) {
        iovec iov{buffer, sizeof buffer};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        const ssize_t n = recvmsg(fds[0].fd, &msg, 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        // A record, even an empty one, carries its timestamp; the end of the stream carries none.
        const cmsghdr* c = CMSG_FIRSTHDR(&msg);
        double t = realtime_s() - start_real;
        bool stamped = false;
        for (; c; c = CMSG_NXTHDR(&msg, const_cast<cmsghdr*>(c)))
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SO_TIMESTAMPNS) {
            timespec ts;
            std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
            t = double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9 - start_real;
            stamped = true;
          }
        if (n > 0) {
          result.out.append(buffer, std::size_t(n));
          if (on_stdout) on_stdout(t, std::string_view(buffer, std::size_t(n)));
        } else if (n < 0 || !stamped) {
          close(fds[0].fd);
          fds[0].fd = -1;
          --open_fds;
        }
      } else {
        const ssize_t n = read(fds[1].fd, buffer, sizeof buffer);
        if (n > 0) {
          result.err.append(buffer, std::size_t(n));
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          close(fds[1].fd);
          fds[1].fd = -1;
          --open_fds;
        }
      }
    }
  }
  for (auto& f : fds)
    if (f.fd >= 0) close(f.fd);
  reap(pid, result, start);
  return result;
}

}  // namespace mi::process
