// Running a child process the way gates must: argv (no shell), captured stdout and stderr, a wall-clock timeout
// that kills the whole process group, the exit status, and the child's peak RSS (wait4 rusage).
#pragma once
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::process {

struct RunOptions {
  std::filesystem::path cwd;                 // empty = inherit
  std::map<std::string, std::string> env;    // added to / overriding the inherited environment
  bool clear_env = false;                    // true: the child's environment is exactly `env`
  double timeout_s = 600;
  bool merge_stderr = false;                 // stderr into stdout
  std::string stdin_data;                    // written to the child's stdin, then closed
};

struct RunResult {
  int exit_code = -1;       // exit status, or 128 + signal
  bool timed_out = false;
  std::string out, err;
  double wall_s = 0;
  long peak_rss_kb = 0;     // ru_maxrss of the child
  std::string command;      // the argv joined, for reports
};

RunResult run(const std::vector<std::string>& argv, const RunOptions& options = {});

// The parts every runner shares (run, run_streaming):
// forks a child in its own process group with stdin/stdout/stderr on the given descriptors, the working directory
// and environment of `options`, executing argv (exit 126/127 when it cannot); returns its pid.
int spawn(const std::vector<std::string>& argv, const RunOptions& options, int in_fd, int out_fd, int err_fd);
// Writes options.stdin_data to `fd` (SIGPIPE ignored: a child that stops reading is not an error here), closes it.
void feed_stdin(int fd, const std::string& data);
// Waits for the child and fills exit_code (128 + signal when killed), peak_rss_kb and wall_s (from `start`).
void reap(int pid, RunResult& result, std::chrono::steady_clock::time_point start);

// The last non-blank line of a child's output parsed as JSON: engines and `metainfer --json` print their result
// object last. Throws nlohmann::json::parse_error when it is not JSON.
nlohmann::json last_json_line(const std::string& output);

// The last `max_chars` characters of `text` (with a marker when cut), for evidence in reports.
std::string tail(const std::string& text, std::size_t max_chars = 4000);

}  // namespace mi::process
