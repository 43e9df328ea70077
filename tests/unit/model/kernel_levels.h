// The kernel levels the model tests run over: Scalar always, plus every SIMD level whose header is in the tree
// (they are written concurrently). A level the CPU lacks is skipped at run time (cpu_supports<K>()).
#pragma once
#include <gtest/gtest.h>

#include "kernels/scalar/scalar.h"

#if __has_include("kernels/avx2/avx2.h")
#include "kernels/avx2/avx2.h"
#define MI_TEST_AVX2 , mi::kernels::Avx2
#else
#define MI_TEST_AVX2
#endif
#if __has_include("kernels/avx512/avx512.h")
#include "kernels/avx512/avx512.h"
#define MI_TEST_AVX512 , mi::kernels::Avx512
#else
#define MI_TEST_AVX512
#endif
#if __has_include("kernels/avx512bf16/avx512bf16.h")
#include "kernels/avx512bf16/avx512bf16.h"
#define MI_TEST_AVX512BF16 , mi::kernels::Avx512Bf16
#else
#define MI_TEST_AVX512BF16
#endif
#if __has_include("kernels/amx/amx.h")
#include "kernels/amx/amx.h"
#define MI_TEST_AMX , mi::kernels::Amx
#else
#define MI_TEST_AMX
#endif

namespace mi_test {

using KernelLevels = ::testing::Types<mi::kernels::Scalar MI_TEST_AVX2 MI_TEST_AVX512 MI_TEST_AVX512BF16 MI_TEST_AMX>;

// Level name for typed-test output.
struct KernelLevelName {
  template <class K>
  static std::string GetName(int) {
    return K::name;
  }
};

template <class K>
bool cpu_supports() {
  const std::string name = K::name;
  if (name == "scalar") return true;
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
  if (name == "avx2") return avx2;
  if (name == "avx512") return avx512;
  if (name == "avx512bf16") return avx512 && __builtin_cpu_supports("avx512bf16");
#if __has_include("kernels/amx/amx.h")
  if (name == "amx") return avx512 && __builtin_cpu_supports("avx512bf16") && mi::kernels::Amx::available();
#endif
  return false;
}

}  // namespace mi_test

// First statement of a typed test: skips levels this CPU cannot run.
#define MI_SKIP_UNSUPPORTED_LEVEL(K)                                                   \
  do {                                                                                 \
    if (!::mi_test::cpu_supports<K>()) GTEST_SKIP() << "CPU lacks level " << K::name; \
  } while (0)
