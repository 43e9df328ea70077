// A generated engine's `serve` command running as a real child process for the tests: started with --port 0, the
// port read from its {"event": "listening"} line, stopped with SIGTERM (the drain) or killed at destruction.
#pragma once
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "process/subprocess.h"

namespace mi_test {

class ServerProcess {
 public:
  // argv: the engine's `serve` command line (with --port 0). Throws when it does not report listening in time.
  explicit ServerProcess(const std::vector<std::string>& argv, const std::string& stderr_file, double timeout_s = 120) {
    int out[2];
    if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
    const int in = ::open("/dev/null", O_RDONLY);
    const int err = ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    pid_ = mi::process::spawn(argv, {}, in, out[1], err);
    ::close(in);
    ::close(err);
    ::close(out[1]);
    out_ = out[0];
    const std::string line = read_line(timeout_s);
    if (line.empty()) throw std::runtime_error("the server printed no listening line (stderr: " + stderr_file + ")");
    ready_ = nlohmann::json::parse(line);
    port_ = ready_.at("port").get<int>();
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      ::kill(-pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
    if (out_ >= 0) ::close(out_);
  }

  int port() const { return port_; }
  const nlohmann::json& ready() const { return ready_; }
  int pid() const { return pid_; }

  // SIGTERM, then waits up to timeout_s for the exit; returns the exit status (-1 when it did not exit in time).
  int terminate(double timeout_s = 60) {
    ::kill(pid_, SIGTERM);
    return wait(timeout_s);
  }
  int wait(double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const int r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

 private:
  std::string read_line(double timeout_s) {
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, 100) <= 0) continue;
      char c;
      if (::read(out_, &c, 1) != 1) return {};
      if (c == '\n') return line;
      line += c;
    }
    return {};
  }

  int pid_ = -1;
  int out_ = -1;
  int port_ = 0;
  nlohmann::json ready_;
};

}  // namespace mi_test
