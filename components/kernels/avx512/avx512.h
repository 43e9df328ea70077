// AVX-512 level (F/BW/VL/DQ, plus AVX2/FMA/F16C): 16-lane f32 kernels; bf16 weights and, in fast mode, bf16
// activations are widened exactly to f32 and multiplied with FMA. Compiled with the avx512 flags of
// cmake/KernelLevels.cmake; call only where __builtin_cpu_supports("avx512f") (and bw/vl/dq) holds.
#pragma once
#include "kernels/kernel_api.h"

namespace mi::kernels {
struct Avx512 {
  static constexpr const char* name = "avx512";
  MI_KERNEL_API
};
}  // namespace mi::kernels
