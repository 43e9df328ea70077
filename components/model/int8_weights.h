// 8-bit weights (ckb/contracts/int8_weights.toml): a weight matrix quantised at load, symmetric, one f32 scale per
// output row (per-output-channel), and the linear layer that consumes it.
//
// Quantisation of row r of W [rows, cols] (bf16 or f32 as stored; every element widened exactly to f32):
//   a_r = max_c |W[r, c]|                (f32, exact)
//   s_r = a_r / 127                      (one f32 division, round to nearest even); s_r = 0 for an all-zero row
//   Q[r, c] = clamp(rne(W[r, c] / s_r), -127, 127)   (f32 division, then round half to even: std::nearbyint in the
//                                        default rounding mode); Q = 0 when s_r = 0
// so W[r, c] ~ s_r * Q[r, c] with |error| <= s_r / 2 per element. -128 is never produced (the range is symmetric).
// A non-finite element is refused (the scale would be inf or NaN), naming the tensor and the row.
//
// The product is y[m, r] = s_r * sum_c x[m, c] * Q[r, c] in f32 (precise numerics only: activations stay f32).
// Rows are quantised in parallel on the engine's thread pool; afterwards the caller may drop the source pages
// (release_mapped_range) so the process keeps the int8 copy only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>

#include "common/bf16.h"
#include "common/error.h"
#include "model/linear.h"
#include "model/resident_weights.h"  // release_mapped_range, allocate_weight_array
#include "runtime/thread_pool.h"

namespace mi::model {

struct Int8Matrix {
  WeightArray<int8_t> q;            // [rows, cols] row-major, in 2 MiB pages (resident_weights.h)
  std::unique_ptr<float[]> scale;   // [rows]
  int rows = 0, cols = 0;
  std::size_t bytes() const { return std::size_t(rows) * std::size_t(cols) + std::size_t(rows) * sizeof(float); }
};

namespace detail {
inline float widen_element(float v) { return v; }
inline float widen_element(bf16_t v) { return bf16_to_f32(v); }
}  // namespace detail

// Quantises one row (the formula above). Returns false when the row holds a non-finite value.
template <class W>
bool quantize_row(const W* w, int cols, int8_t* q, float* scale) {
  // The max over 8 independent lanes (a max is exact, so the order cannot change it; one running max would be a
  // chain of dependent compares, ~4 cycles per element), and a flag for any element that is not finite (NaN
  // compares false, so |v| <= FLT_MAX is false for NaN and +-inf). Branch-free, so the compiler vectorises it.
  constexpr int kLanes = 8;
  float lane_max[kLanes] = {};
  bool finite = true;
  int c0 = 0;
  for (; c0 + kLanes <= cols; c0 += kLanes)
    for (int j = 0; j < kLanes; ++j) {
      const float a = std::fabs(detail::widen_element(w[c0 + j]));
      finite &= a <= std::numeric_limits<float>::max();
      lane_max[j] = a > lane_max[j] ? a : lane_max[j];
    }
  for (int c = c0; c < cols; ++c) {
    const float a = std::fabs(detail::widen_element(w[c]));
    finite &= a <= std::numeric_limits<float>::max();
    lane_max[0] = a > lane_max[0] ? a : lane_max[0];
  }
  if (!finite) return false;
  float amax = 0.0f;
  for (float m : lane_max) amax = std::max(amax, m);
  const float s = amax / 127.0f;
  *scale = s;
  if (s == 0.0f) {
    std::fill(q, q + cols, int8_t(0));
    return true;
  }
  for (int c = 0; c < cols; ++c) {
    const float r = std::nearbyint(detail::widen_element(w[c]) / s);
    q[c] = int8_t(std::clamp(r, -127.0f, 127.0f));
  }
  return true;
}

// Quantises W [rows, cols] on `pool`. `name` is the checkpoint tensor, for the error.
template <class W>
Int8Matrix quantize_int8(runtime::ThreadPool& pool, const W* w, int rows, int cols, const std::string& name) {
  static_assert(std::is_same_v<W, float> || std::is_same_v<W, bf16_t>, "int8 quantisation reads bf16 or f32 weights");
  Int8Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.q = allocate_weight_array<int8_t>(std::size_t(rows) * std::size_t(cols), "weight '" + name + "' (int8)");
  m.scale.reset(new float[std::size_t(rows)]);
  const std::size_t participants = std::size_t(std::max(1, pool.size()));
  std::unique_ptr<int[]> bad_row(new int[participants]);  // per chunk: the first row with a non-finite value, or -1
  for (std::size_t i = 0; i < participants; ++i) bad_row[i] = -1;
  pool.parallel_chunks(rows, 64, [&](int chunk, int r0, int r1) {
    for (int r = r0; r < r1; ++r)
      if (!quantize_row(w + std::size_t(r) * std::size_t(cols), cols, m.q.get() + std::size_t(r) * std::size_t(cols),
                        m.scale.get() + r) &&
          bad_row[std::size_t(chunk)] < 0)
        bad_row[std::size_t(chunk)] = r;
  });
  for (std::size_t i = 0; i < participants; ++i)
    if (bad_row[i] >= 0)
      fail("weight '", name, "': row ", bad_row[i],
           " holds a non-finite value; int8 quantisation (ckb/contracts/int8_weights.toml) needs finite weights");
  return m;
}

// y[m, r] = s_r * sum_c x[m, c] * Q[r, c] for output rows [r0, r1): the int8 overload of linear_block()
// (linear.h), so linear() and linear_parts() split int8 layers exactly as bf16 ones.
template <class K, class X>
void linear_block(const Int8Matrix* weight, int in_features, const X* x, int M, float* y, int out_features, int r0,
                  int r1) {
  static_assert(std::is_same_v<X, float>, "int8 weights take f32 activations (precise numerics) only");
  const std::size_t ld = std::size_t(in_features);
  const int8_t* q = weight->q.get() + std::size_t(r0) * ld;
  const float* s = weight->scale.get() + r0;
  if (M == 1) K::matvec(q, s, ld, x, y + r0, r1 - r0, in_features);
  else K::matmul(q, s, ld, x, ld, y + r0, std::size_t(out_features), M, r1 - r0, in_features);
}
inline void check_linear_shape(const Int8Matrix* weight, int out_features, int in_features) {
  if (weight->rows != out_features || weight->cols != in_features)
    fail("int8 linear: the matrix is [", weight->rows, ", ", weight->cols, "], the layer expects [", out_features, ", ",
         in_features, "]");
}

}  // namespace mi::model
