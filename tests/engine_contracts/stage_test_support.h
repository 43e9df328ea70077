// Shared helpers of the engine test contracts (copied into every generated engine as tests/): deterministic
// random data and double-precision references. The references spell every formula out, independent of the
// components under test.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "common/bf16.h"

namespace stage {

// Deterministic uniform values in [-scale, scale) (64-bit LCG, Knuth MMIX constants).
inline std::vector<float> random_floats(std::size_t n, uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& f : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    f = scale * (float(double(x >> 11) * 0x1.0p-53) * 2.0f - 1.0f);
  }
  return v;
}

inline std::vector<mi::bf16_t> to_bf16(const std::vector<float>& v) {
  std::vector<mi::bf16_t> out(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) out[i] = mi::f32_to_bf16(v[i]);
  return out;
}

inline double widen(float v) { return v; }
inline double widen(mi::bf16_t v) { return mi::bf16_to_f32(v); }

// y[r] = sum_c W[r, c] x[c] in double; also returns sum |W x| per row for error bounds.
template <class W, class X>
void matvec_reference(const W* w, const X* x, int rows, int cols, std::vector<double>& y, std::vector<double>& abs_sum) {
  y.assign(std::size_t(rows), 0.0);
  abs_sum.assign(std::size_t(rows), 0.0);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const double p = widen(w[std::size_t(r) * cols + c]) * widen(x[c]);
      y[std::size_t(r)] += p;
      abs_sum[std::size_t(r)] += std::fabs(p);
    }
}

// f32 accumulation of n products: |error| <= n * 2^-23 * sum|products| (standard bound, a few ulp slack).
inline double f32_sum_bound(int n, double abs_sum) { return (n + 4) * 0x1.0p-23 * abs_sum + 1e-30; }

}  // namespace stage
