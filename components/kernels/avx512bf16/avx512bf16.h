// AVX-512 BF16 level (avx512 + AVX512_BF16): as the avx512 level, except that the fast kernels (bf16 activations x
// bf16 weights) use VDPBF16PS, which multiplies bf16 pairs exactly and accumulates in f32. Per Intel SDM, VDPBF16PS
// treats subnormal inputs as zero and flushes subnormal results, so fast-mode results may differ from the scalar
// level for subnormal values in addition to summation order. VDPBF16PS serves the memory-bound decode shapes; the
// compute-bound prefill uses the f32 FMA kernel (see avx512bf16.cpp for the measurement).
// Call only where __builtin_cpu_supports("avx512bf16").
#pragma once
#include "kernels/kernel_api.h"

namespace mi::kernels {
struct Avx512Bf16 {
  static constexpr const char* name = "avx512bf16";
  MI_KERNEL_API
};
}  // namespace mi::kernels
