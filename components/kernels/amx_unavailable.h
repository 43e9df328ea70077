// The error an AMX kernel raises when the tile unit cannot be used. Kept out of kernels/amx/ on purpose: that
// directory is compiled with AMX/AVX-512 flags, and an exception path there would emit inline (weak) library
// symbols - std::string, mi::Error - that the linker may merge into code meant for every CPU
// (tests/unit/kernels/isa_test.cpp checks that no level object defines weak symbols).
#pragma once

namespace mi::kernels {
[[noreturn]] void fail_amx_unavailable();
}  // namespace mi::kernels
