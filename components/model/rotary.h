// Rotary position embedding (Su et al. 2021, RoFormer) in the HF "rotate-half" layout: dimension i of a head
// pairs with i + head_dim/2, rotated by angle pos * inv_freq[i], inv_freq[i] = 1 / theta^(2i / head_dim).
// The cos/sin table is computed once for every position up to max_positions; applying it is K::rope_rotate_half
// per head. Angles follow the f32 reference: inv_freq rounded to f32, angle = f32(pos) * inv_freq in f32, then
// cos/sin of that f32 angle. Measured on the golden traces (tests/unit/model/golden_forward_test.cpp) this is
// closer to HF than exact double angles: max logit error 6.0e-5 vs 1.5e-4 (llama-tiny), because the reference's
// own angles carry the f32 rounding of pos * inv_freq (up to ~1e-5 rad at position 180).
//
// Llama 3 frequency scaling (rope_type "llama3", Meta's Llama 3.1 reference, published in the Llama-3.1 model
// card patch `apply_scaling`): with wavelen = 2*pi / f, low_wavelen = original_max / low_freq_factor and
// high_wavelen = original_max / high_freq_factor:
//   wavelen < high_wavelen  -> f                      (high frequencies kept)
//   wavelen > low_wavelen   -> f / factor              (low frequencies slowed down)
//   otherwise               -> (1 - s) * f / factor + s * f,
//                              s = (original_max / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
//
// Partial rotary (Qwen3-Next / Qwen3.5: partial_rotary_factor 0.25): only the first rotary_dim dims of each head are
// rotated, as a rotate-half head of size rotary_dim (pairs (i, i + rotary_dim/2), inv_freq[i] = theta^(-2i /
// rotary_dim)); dims [rotary_dim, head_dim) pass through unchanged. rotary_dim = head_dim is the full rotary above.
#pragma once
#include <cstddef>
#include <optional>
#include <vector>

#include "common/error.h"
#include "runtime/thread_pool.h"

namespace mi::model {

struct Llama3RopeScaling {
  double factor = 8.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
};

// inv_freq[i] for i in [0, head_dim/2), computed in double (scaled when `scaling` is set).
std::vector<double> rotary_inv_freq(int head_dim, double theta, const std::optional<Llama3RopeScaling>& scaling);

class RotaryTable {
 public:
  // rotary_dim: the rotated leading dims of each head, even, in (0, head_dim]; 0 means the whole head.
  RotaryTable(int head_dim, int max_positions, double theta, const std::optional<Llama3RopeScaling>& scaling,
              int rotary_dim = 0);

  int head_dim() const { return head_dim_; }
  int rotary_dim() const { return rotary_dim_; }
  int max_positions() const { return max_positions_; }
  // cos/sin of position `pos`: rotary_dim/2 floats each.
  const float* cos(int pos) const { return cos_.data() + std::size_t(pos) * std::size_t(rotary_dim_ / 2); }
  const float* sin(int pos) const { return sin_.data() + std::size_t(pos) * std::size_t(rotary_dim_ / 2); }

 private:
  int head_dim_;
  int rotary_dim_;
  int max_positions_;
  std::vector<float> cos_;  // [max_positions, rotary_dim/2]
  std::vector<float> sin_;
};

// Rotates every head of rows [0, rows) of x in place (its first table.rotary_dim() dims); row t is at position
// first_position + t.
//   x [rows, heads * head_dim] with row stride `row_stride` floats.
template <class K>
void apply_rotary(runtime::ThreadPool& pool, const RotaryTable& table, float* x, int rows, std::size_t row_stride,
                  int heads, int head_dim, int first_position) {
  if (head_dim != table.head_dim())
    fail("rotary: head_dim ", head_dim, " does not match the table's head_dim ", table.head_dim());
  if (first_position < 0 || rows < 0 || first_position + rows > table.max_positions())
    fail("rotary: positions [", first_position, ", ", first_position + rows, ") exceed the table's ",
         table.max_positions(), " positions (max context)");
  pool.parallel_for(rows, 8, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
      const int pos = first_position + r;
      float* row = x + std::size_t(r) * row_stride;
      for (int h = 0; h < heads; ++h)
        K::rope_rotate_half(row + std::size_t(h) * head_dim, table.cos(pos), table.sin(pos), table.rotary_dim());
    }
  });
}

// Batched decode: row r of x is at its own position positions[r] (one new token of each of `rows` sequences).
template <class K>
void apply_rotary_at(runtime::ThreadPool& pool, const RotaryTable& table, float* x, int rows, std::size_t row_stride,
                     int heads, int head_dim, const int* positions) {
  if (head_dim != table.head_dim())
    fail("rotary: head_dim ", head_dim, " does not match the table's head_dim ", table.head_dim());
  for (int r = 0; r < rows; ++r)
    if (positions[r] < 0 || positions[r] >= table.max_positions())
      fail("rotary: row ", r, " position ", positions[r], " is outside the table's ", table.max_positions(),
           " positions (max context)");
  pool.parallel_for(rows, 8, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
      float* row = x + std::size_t(r) * row_stride;
      for (int h = 0; h < heads; ++h)
        K::rope_rotate_half(row + std::size_t(h) * head_dim, table.cos(positions[r]), table.sin(positions[r]),
                            table.rotary_dim());
    }
  });
}

}  // namespace mi::model
