// A stand-in stage executable for L1 gate tests: a shell script at DIR/build/stage_<stage> that finds the
// --gtest_output=json:FILE argument the gate passes (as $out) and then runs `body`, recorded in `record` as if B0
// had built it. Tests plant reports (or none) through `body` to see what the gate accepts.
#pragma once
#include <filesystem>
#include <fstream>
#include <string>

#include "gates/gates.h"
#include "generator/manifest.h"

namespace mi_test {

inline void plant_stage_executable(const std::filesystem::path& engine_dir, const std::string& stage, const std::string& body,
                                   mi::gates::BuildRecord& record) {
  const std::filesystem::path exe = engine_dir / "build" / ("stage_" + stage);
  std::filesystem::create_directories(exe.parent_path());
  std::ofstream(exe) << "#!/bin/sh\nout=\nfor a; do case $a in --gtest_output=json:*) out=${a#--gtest_output=json:};; esac; done\n"
                     << body << "\n";
  std::filesystem::permissions(exe, std::filesystem::perms::owner_all);
  record.executables["stage_" + stage] = mi::generator::sha256_file(exe);
}

}  // namespace mi_test
