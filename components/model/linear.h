// Linear layers (y = x W^T, no bias) split across the thread pool, in the two numeric modes of an engine:
//   precise: f32 activations, K::matvec / K::matmul (f32 accumulation) - reproduces an f32 reference.
//   fast:    activations rounded to bf16 once per input (K::to_bf16), then K::matvec_fast / K::matmul_fast
//            (bf16 x bf16 products, f32 accumulation).
// The mode is carried by the activation type: MatmulInput<Numerics::precise> is float, <fast> is bf16_t, and
// linear() picks the kernel by overload, so a generated engine has one code path and no runtime switch.
// One token (M == 1, decode) uses matvec; several tokens (prefill) use matmul over all of them at once.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <type_traits>

#include "common/bf16.h"
#include "runtime/thread_pool.h"

namespace mi::model {

enum class Numerics { precise, fast };

template <Numerics N>
using MatmulInput = std::conditional_t<N == Numerics::precise, float, bf16_t>;

// The activations a linear layer of mode N consumes: precise returns x itself; fast rounds x[0, n) to bf16
// into `scratch` (n elements) and returns it. `scratch` is unused (may be null) in precise mode.
template <class K, Numerics N>
const MatmulInput<N>* matmul_input(runtime::ThreadPool& pool, const float* x, std::size_t n,
                                   MatmulInput<N>* scratch) {
  if constexpr (N == Numerics::precise) {
    return x;
  } else {
    constexpr int kGrain = 4096;
    const int blocks = int((n + kGrain - 1) / kGrain);
    pool.parallel_for(blocks, 1, [&](int b0, int b1) {
      const std::size_t begin = std::size_t(b0) * kGrain;
      const std::size_t end = std::min(n, std::size_t(b1) * kGrain);
      K::to_bf16(x + begin, scratch + begin, int(end - begin));
    });
    return scratch;
  }
}

namespace detail {
// Output rows are handed to threads in multiples of this many rows, so SIMD kernels that tile rows see the same
// tiles whatever the thread count.
constexpr int kRowUnit = 16;
// Roughly the multiply-adds one chunk should do before splitting pays for the wake-up.
constexpr long kMinMacsPerChunk = 1L << 15;
}  // namespace detail

// Output rows [r0, r1) of one linear layer: the kernel call every row split makes. int8_weights.h overloads it (and
// check_linear_shape) for quantised matrices; linear() and linear_parts() call both unqualified, so argument-
// dependent lookup finds those overloads when they are included.
template <class K, class W, class X>
void linear_block(const W* weight, int in_features, const X* x, int M, float* y, int out_features, int r0, int r1) {
  static_assert(std::is_same_v<X, float> || std::is_same_v<W, bf16_t>, "fast (bf16) activations need bf16 weights");
  const std::size_t ld = std::size_t(in_features);
  if (M == 1) {
    if constexpr (std::is_same_v<X, float>)
      K::matvec(weight + std::size_t(r0) * ld, ld, x, y + r0, r1 - r0, in_features);
    else
      K::matvec_fast(weight + std::size_t(r0) * ld, ld, x, y + r0, r1 - r0, in_features);
  } else {
    if constexpr (std::is_same_v<X, float>)
      K::matmul(weight + std::size_t(r0) * ld, ld, x, ld, y + r0, std::size_t(out_features), M, r1 - r0,
                in_features);
    else
      K::matmul_fast(weight + std::size_t(r0) * ld, ld, x, ld, y + r0, std::size_t(out_features), M, r1 - r0,
                     in_features);
  }
}
template <class W>
void check_linear_shape(const W*, int, int) {}  // a raw checkpoint matrix carries no shape to check

// The row split every linear layer uses (bf16/f32 here, int8 in int8_weights.h): fn(r0, r1) over blocks of the
// `rows` output rows of a layer with `cols` inputs and M tokens. Blocks start at multiples of kRowUnit rows and hold
// enough multiply-adds to pay for a wake-up; about 4 per participant, claimed from a shared counter, so a thread
// the OS delays (a shared machine) holds up one block instead of a fixed half of the rows. Every row is the same
// kernel call on the same block boundaries whoever claims it, so results equal a static split's.
template <class Fn>
void for_row_blocks(runtime::ThreadPool& pool, int rows, int cols, int M, Fn&& fn) {
  const long macs_per_unit = long(detail::kRowUnit) * cols * std::max(M, 1);
  const int units_per_chunk = int(std::max(1L, detail::kMinMacsPerChunk / std::max(1L, macs_per_unit)));
  const int grain = units_per_chunk * detail::kRowUnit;
  const int participants = pool.chunk_count(rows, grain);
  if (participants <= 1) {
    if (rows > 0) fn(0, rows);
    return;
  }
  constexpr int kBlocksPerThread = 4;
  const int blocks = (rows + grain - 1) / grain;
  const int block_rows = std::max(grain, (blocks / (participants * kBlocksPerThread)) * grain);
  const int n_blocks = (rows + block_rows - 1) / block_rows;
  std::atomic<int> next{0};
  pool.parallel_chunks(participants, 1, [&](int, int, int) {
    for (int b = next.fetch_add(1, std::memory_order_relaxed); b < n_blocks; b = next.fetch_add(1, std::memory_order_relaxed))
      fn(b * block_rows, std::min(rows, (b + 1) * block_rows));
  });
}

// y[m, r] = sum_c x[m, c] * weight[r, c]
//   weight [out_features, in_features] row-major (bf16 from the checkpoint, or f32; fast mode needs bf16; or an
//          int8_weights.h Int8Matrix)
//   x      [M, in_features]  f32 (precise) or bf16 (fast, from matmul_input)
//   y      [M, out_features] f32
template <class K, class W, class X>
void linear(runtime::ThreadPool& pool, const W* weight, int out_features, int in_features, const X* x, int M,
            float* y) {
  check_linear_shape(weight, out_features, in_features);
  for_row_blocks(pool, out_features, in_features, M, [&](int r0, int r1) {
    linear_block<K>(weight, in_features, x, M, y, out_features, r0, r1);
  });
}

// One of several linear layers that read the same input (q/k/v, gate/up): its weight, rows and output.
template <class W>
struct LinearPart {
  const W* weight;
  int out_features;
  float* y;  // [M, out_features]
};
template <class W>
LinearPart<W> part(const W* weight, int out_features, float* y) {
  return {weight, out_features, y};
}

// linear() for each part, in one pool dispatch over the parts' rows laid end to end: one wake-up and one join
// instead of one per layer (a decode step's q/k/v are three short streams; issue 9's per-op profile). A row block
// that spans two parts becomes two kernel calls; each row is still the same kernel arithmetic (the kernels' output
// rows do not depend on where a call starts), so every y equals linear()'s bitwise.
template <class K, class X, class W, class... Rest>
void linear_parts(runtime::ThreadPool& pool, int in_features, const X* x, int M, const LinearPart<W>& first,
                  const Rest&... rest) {
  const std::array<LinearPart<W>, 1 + sizeof...(Rest)> parts{first, rest...};
  int total = 0;
  for (const auto& p : parts) {
    check_linear_shape(p.weight, p.out_features, in_features);
    total += p.out_features;
  }
  for_row_blocks(pool, total, in_features, M, [&](int r0, int r1) {
    int base = 0;
    for (const auto& p : parts) {
      const int lo = std::max(r0, base), hi = std::min(r1, base + p.out_features);
      if (lo < hi) linear_block<K>(p.weight, in_features, x, M, p.y, p.out_features, lo - base, hi - base);
      base += p.out_features;
    }
  });
}

}  // namespace mi::model
