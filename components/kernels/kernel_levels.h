// All x86 kernel levels in one include, plus a run-time check of which ones the running CPU can execute. For
// tests, benchmarks and the toolkit, which hold every level in one binary; a generated engine includes only the
// level its constraints chose.
#pragma once
#include "kernels/amx/amx.h"
#include "kernels/avx2/avx2.h"
#include "kernels/avx512/avx512.h"
#include "kernels/avx512bf16/avx512bf16.h"
#include "kernels/kernel_api.h"
#include "kernels/scalar/scalar.h"

namespace mi::kernels {

// True when the running CPU has every instruction-set extension the level is compiled with
// (cmake/KernelLevels.cmake: avx2 = AVX2+FMA+F16C; avx512 adds F/BW/VL/DQ; avx512bf16 adds AVX512_BF16; amx adds
// AMX-TILE/AMX-BF16 and needs the OS to grant the tile state).
inline bool cpu_supports(Level level) {
  switch (level) {
    case Level::scalar: return true;
    case Level::avx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    case Level::avx512:
      return cpu_supports(Level::avx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
    case Level::avx512bf16: return cpu_supports(Level::avx512) && __builtin_cpu_supports("avx512bf16");
    case Level::amx: return cpu_supports(Level::avx512bf16) && Amx::available();  // also asks Linux for the tiles
  }
  return false;
}

template <class K>
constexpr Level level_of();
template <> constexpr Level level_of<Scalar>() { return Level::scalar; }
template <> constexpr Level level_of<Avx2>() { return Level::avx2; }
template <> constexpr Level level_of<Avx512>() { return Level::avx512; }
template <> constexpr Level level_of<Avx512Bf16>() { return Level::avx512bf16; }
template <> constexpr Level level_of<Amx>() { return Level::amx; }

}  // namespace mi::kernels
