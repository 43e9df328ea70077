// What the L1 stage gate refuses in an engine directory before it runs a stage's test executable. That executable is
// compiled from the test contract (tests/, protected and hash-checked in the agents' workflow) together with the
// engine's sources, which agents write, and the gate reads its verdict from GoogleTest's report of the run
// (gtest_results.h). Code compiled into the same process can tamper with GoogleTest itself, so these routes are
// closed before the executable runs:
//   - shadowing: the sources are on the include path ahead of the system (`-I src`), so src/gtest/gtest.h would
//     replace GoogleTest's header for the contract, and src/vector or src/stdlib.h a header GoogleTest includes.
//     Refused: any file or directory named gtest*/gmock* anywhere, and under src/ any file whose path names a system
//     header or that has no extension (the C++ library's headers have none);
//   - macro surgery: a #define, #undef or push/pop_macro of GoogleTest's macros (TEST, EXPECT_*, ASSERT_*, GTEST_*,
//     ...) in any file outside tests/, wherever it lies (a file the workflow wrote, a gate's evidence, can be
//     #included by a relative path too);
//   - talking to GoogleTest: a source file outside tests/ that mentions gtest/gmock (an include, the
//     --gtest_output flag it would parse to find the report), testing:: or RUN_ALL_TESTS, or that defines main()
//     anywhere but the engine's entry point (a main() in the engine library replaces gtest_main's).
// What stays open: the process can still find and write the report by routes no text check recognises (a name
// assembled at run time), so a report is evidence, not proof; the acceptance gate, which runs the engine binary out of
// process and compares its output with the checkpoint's trace or the oracle, is the verdict no such code can forge.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::gates {

// One line per problem ("src/gtest/gtest.h: ..."), in path order; empty when the directory may be judged. The
// top-level build/ (recreated by B0) is not scanned.
std::vector<std::string> stage_source_problems(const std::filesystem::path& engine_dir);

}  // namespace mi::gates
