// One line of `strace -f` output ("PID call(args) = result", or "PID <... call resumed> ..."): the process id and
// the rest from the call's name on. Shared by the acceptance sandbox's audit (gates/sandbox.cpp) and the agents'
// command audit (agents/command_audit.cpp), which read different calls out of the same format.
#pragma once
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace mi::process {

struct StraceLine {
  long pid = 0;
  std::string_view rest;  // from the call's name (or "<... ") to the end of the line; views the line
};

// nullopt for a line that does not start with a pid followed by a call (strace's own messages, blank lines).
inline std::optional<StraceLine> parse_strace_line(std::string_view line) {
  std::size_t pos = 0;
  while (pos < line.size() && line[pos] >= '0' && line[pos] <= '9') ++pos;
  if (pos == 0 || pos > 18) return std::nullopt;
  const long pid = std::stol(std::string(line.substr(0, pos)));
  const std::size_t name_start = line.find_first_not_of(' ', pos);
  if (name_start == std::string_view::npos) return std::nullopt;
  return StraceLine{pid, line.substr(name_start)};
}

}  // namespace mi::process
