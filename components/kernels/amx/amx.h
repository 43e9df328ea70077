// AMX level (avx512bf16 + AMX-TILE + AMX-BF16, Intel Sapphire Rapids and later): as the avx512bf16 level, except
// that matmul over more than 8 tokens (prefill) runs on the AMX tile unit (TDPBF16PS), which does
// 16 x 16 x 32 bf16 multiply-adds with f32 accumulation per instruction - about 16x the f32 FMA rate of a core.
//   precise: each f32 activation is split into three bf16 terms, x = hi + mid + lo (8 significant bits each, so
//            the split is exact), and all three are multiplied with the bf16 weights: the products are the exact f32
//            products and the results stay within the kernel contract's f32 summation bound. Three tile products
//            per weight tile still run at about 5x the f32 FMA rate.
//   fast:    the bf16 activations are used as they are.
// Per Intel SDM (TDPBF16PS) subnormal inputs are treated as zero and the f32 accumulation flushes subnormal results.
// Linux grants a process the AMX tile data state only on request (arch_prctl ARCH_REQ_XCOMP_PERM, kernel >= 5.16);
// Amx::available() makes that request once and reports whether the CPU and the OS allow AMX.
#pragma once
#include "kernels/kernel_api.h"

namespace mi::kernels {
struct Amx {
  static constexpr const char* name = "amx";
  MI_KERNEL_API
  // CPU has AMX-TILE/AMX-BF16 (and the avx512bf16 level) and the OS granted this process the tile data state.
  static bool available();
};
}  // namespace mi::kernels
