// Shared helpers of the model tests: deterministic random data and double-precision reference loops.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <random>
#include <string>
#include <vector>

#include "common/bf16.h"
#include "common/error.h"
#include "io/safetensors.h"

namespace mi_test {

inline std::vector<float> random_floats(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<mi::bf16_t> random_bf16(std::size_t n, unsigned seed, float scale = 1.0f) {
  std::vector<mi::bf16_t> v(n);
  const std::vector<float> f = random_floats(n, seed, scale);
  for (std::size_t i = 0; i < n; ++i) v[i] = mi::f32_to_bf16(f[i]);
  return v;
}

inline double widen(float v) { return v; }
inline double widen(mi::bf16_t v) { return mi::bf16_to_f32(v); }

// Rounds like the fast mode does before a matmul.
inline std::vector<float> bf16_rounded(const float* x, std::size_t n) {
  std::vector<float> out(n);
  for (std::size_t i = 0; i < n; ++i) out[i] = mi::bf16_to_f32(mi::f32_to_bf16(x[i]));
  return out;
}

// y[m, r] = sum_c x[m, c] W[r, c] in double; also returns sum |x||W| per output for error bounds.
template <class W>
void reference_linear(const W* w, int rows, int cols, const float* x, int M, std::vector<double>& y,
                      std::vector<double>& magnitude) {
  y.assign(std::size_t(M) * rows, 0.0);
  magnitude.assign(y.size(), 0.0);
  for (int m = 0; m < M; ++m)
    for (int r = 0; r < rows; ++r) {
      double acc = 0, mag = 0;
      for (int c = 0; c < cols; ++c) {
        const double p = widen(w[std::size_t(r) * cols + c]) * double(x[std::size_t(m) * cols + c]);
        acc += p;
        mag += std::fabs(p);
      }
      y[std::size_t(m) * rows + r] = acc;
      magnitude[std::size_t(m) * rows + r] = mag;
    }
}

inline std::vector<double> reference_rms_norm(const float* x, const float* w, int n, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += double(x[i]) * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  std::vector<double> y(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) y[std::size_t(i)] = double(x[i]) * inv * w[i];
  return y;
}

// Full causal GQA attention in double over all n tokens: q [n, H*D], k/v [n, KV*D] -> out [n, H*D].
inline std::vector<double> reference_attention(const std::vector<float>& q, const std::vector<float>& k,
                                        const std::vector<float>& v, int n, int heads, int kv_heads, int d) {
  std::vector<double> out(std::size_t(n) * heads * d, 0.0);
  const int group = heads / kv_heads;
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h) {
      const int g = h / group;
      std::vector<double> s(std::size_t(t) + 1);
      double mx = -1e300;
      for (int j = 0; j <= t; ++j) {
        double acc = 0;
        for (int i = 0; i < d; ++i)
          acc += double(q[(std::size_t(t) * heads + h) * d + i]) * k[(std::size_t(j) * kv_heads + g) * d + i];
        s[std::size_t(j)] = acc / std::sqrt(double(d));
        mx = std::max(mx, s[std::size_t(j)]);
      }
      double sum = 0;
      for (auto& e : s) sum += (e = std::exp(e - mx));
      for (int j = 0; j <= t; ++j)
        for (int i = 0; i < d; ++i)
          out[(std::size_t(t) * heads + h) * d + i] += s[std::size_t(j)] / sum * v[(std::size_t(j) * kv_heads + g) * d + i];
    }
  return out;
}

// A weight of a checkpoint as bf16, with its dtype and shape checked.
inline const mi::bf16_t* bf16_weight(const mi::io::WeightStore& store, const std::string& name,
                                     std::vector<int64_t> shape) {
  const mi::io::TensorView& t = store.get(name);
  if (t.dtype != mi::io::DType::BF16) mi::fail(name, ": expected BF16");
  if (t.shape != shape) mi::fail(name, ": unexpected shape");
  return t.as<mi::bf16_t>();
}

}  // namespace mi_test
