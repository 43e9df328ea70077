#include "generator/cpp_format.h"

#include <filesystem>

#include "ckb/ckb.h"
#include "common/error.h"
#include "process/subprocess.h"

namespace mi::generator {

std::string format_cpp(const std::string& text, const std::string& name) {
  const std::filesystem::path style = ckb::default_repo_root() / ".clang-format";
  if (!std::filesystem::exists(style)) fail("generate: ", style.string(), " (the generated code's style) is missing");
  process::RunOptions o;
  o.stdin_data = text;
  o.timeout_s = 60;
  const process::RunResult r =
      process::run({"clang-format", "--style=file:" + style.string(), "--assume-filename=" + name}, o);
  if (r.exit_code == 127)
    fail("generate: clang-format is not installed (it formats the generated ", name,
         "); install the Debian package clang-format, or run ./setup.sh");
  if (r.exit_code != 0 || r.out.empty())
    fail("generate: clang-format failed on the generated ", name, " (exit ", r.exit_code, "): ", r.err);
  return r.out;
}

}  // namespace mi::generator
