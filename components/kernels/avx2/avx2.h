// AVX2 level (AVX2 + FMA + F16C): 8-lane f32 kernels; bf16 weights and, in fast mode, bf16 activations are widened
// exactly to f32 and multiplied with FMA. Compiled with the avx2 flags of cmake/KernelLevels.cmake, so it contains
// no AVX-512 instruction (tests/unit/kernels check the object code); call only where
// __builtin_cpu_supports("avx2") and ("fma") hold.
#pragma once
#include "kernels/kernel_api.h"

namespace mi::kernels {
struct Avx2 {
  static constexpr const char* name = "avx2";
  MI_KERNEL_API
};
}  // namespace mi::kernels
