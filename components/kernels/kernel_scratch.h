// Per-thread scratch memory for the kernels (the dot forms' interleaved activations).
//
// Defined in its own translation unit compiled without ISA flags, so the ISA levels' objects hold no out-of-line
// std::vector code: an inline function instantiated in an AVX-512 object is a weak symbol the linker may pick for
// an AVX2 caller too (tests/unit/kernels/isa_test.cpp checks that the level objects define no weak symbols).
#pragma once
#include <cstddef>

namespace mi::kernels {

// At least `bytes` bytes, 64-byte aligned, owned by the calling thread and reused by its next call (which may move
// it): valid until this thread calls again.
void* thread_scratch(std::size_t bytes);

}  // namespace mi::kernels
