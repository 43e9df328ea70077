// Shared helpers for the kernel tests: the list of x86 levels under test (each compared with the Scalar oracle),
// the CPU check that skips a level the machine cannot run, random inputs and the error bounds.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "common/bf16.h"
#include "kernels/kernel_levels.h"

namespace mi::kernels::test {

using Levels = ::testing::Types<Avx2, Avx512, Avx512Bf16, Amx>;

// Skips (with the reason printed) when the running CPU lacks the level's instructions.
#define MI_SKIP_IF_UNSUPPORTED(K)                                                                     \
  do {                                                                                                \
    if (!::mi::kernels::cpu_supports(::mi::kernels::level_of<K>()))                                   \
      GTEST_SKIP() << "kernel level " << K::name << " not run: this CPU lacks its instruction set"; \
  } while (0)

// Unit roundoff of f32 (round to nearest): 2^-24.
constexpr double kU = 1.0 / 16777216.0;

inline std::vector<float> random_floats(std::size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline std::vector<bf16_t> to_bf16_vector(const std::vector<float>& v) {
  std::vector<bf16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

inline double as_double(float v) { return v; }
inline double as_double(bf16_t v) { return bf16_to_f32(v); }

// A quiet NaN for padding between `cols` and the row stride: a kernel that reads past a row poisons its result.
inline float pad_value(float) { return std::numeric_limits<float>::quiet_NaN(); }
inline bf16_t pad_value(bf16_t) { return bf16_t{0x7fc0}; }

// Matrix [rows, cols] with row stride ld > cols, padding NaN, values uniform in [-1, 1) (bf16: rounded from f32).
template <class T>
std::vector<T> random_matrix(int rows, int cols, std::size_t ld, uint32_t seed) {
  const std::vector<float> v = random_floats(std::size_t(rows) * ld, -1.0f, 1.0f, seed);
  std::vector<T> out(v.size());
  for (int r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < ld; ++c) {
      const std::size_t i = std::size_t(r) * ld + c;
      if (int(c) >= cols) {
        out[i] = pad_value(T{});
      } else if constexpr (std::is_same_v<T, float>) {
        out[i] = v[i];
      } else {
        out[i] = f32_to_bf16(v[i]);
      }
    }
  return out;
}

// Error bound for a length-n f32 dot product computed in two different summation orders (the level and the
// scalar oracle). Each order satisfies |fl(sum) - sum| <= depth * u * sum|terms| (Higham, Accuracy and Stability
// of Numerical Algorithms, 2nd ed., eq. 3.5 / 4.4) with depth <= n for the scalar loop and <= n/lanes + cols/KC +
// log2(lanes) + 2 for the blocked vector kernels; the sum of the two is below (2n + 32) * u = (n + 16) * 2^-23.
inline double dot_bound(int n, double sum_abs_terms) { return (double(n) + 16.0) * 2.0 * kU * sum_abs_terms + 1e-30; }

}  // namespace mi::kernels::test
