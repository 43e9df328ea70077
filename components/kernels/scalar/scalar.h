// Scalar reference kernels: plain loops, no intrinsics. The oracle for every other level (llm.c style).
#pragma once
#include "kernels/kernel_api.h"

namespace mi::kernels {
struct Scalar {
  static constexpr const char* name = "scalar";
  MI_KERNEL_API
};
}  // namespace mi::kernels
