// The C++ source of the program `generate --tune` compiles once per candidate value of a kernel parameter: it
// includes one kernel level (compiled with the platform's flags and -D<parameter>=<value>), checks the level
// against the scalar level on the model's own shapes (the kernel contract's bound), and times the operation the
// parameter affects with the engine's row split across threads.
#pragma once
#include <string>

namespace mi::tune {

// Source text for kernel struct `kernel_struct` whose header is kernels/<level>/<level>.h.
std::string timing_program_source(const std::string& level, const std::string& kernel_struct);

}  // namespace mi::tune
