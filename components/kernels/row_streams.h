// The order in which a matrix-vector kernel visits its output rows, shared by the kernels that tile rows.
//
// A tile of R rows reads R weight rows side by side. When those are R adjacent rows of a row-major matrix, each is a
// short stream (2 KiB for 1024 bf16 columns) that ends before a hardware prefetcher has learned it. Taking the R
// rows from R far-apart groups instead (n = rows / R; tile i holds rows i, n + i, ..., (R - 1) n + i) makes the
// tiles walk R long sequential streams, one per group, which the prefetchers follow. Rows past R * n go one by one.
// The rows a tile holds never change what an output row computes, so results do not depend on this order.
#pragma once
#include <cstddef>

namespace mi::kernels {

// How far ahead each stream is prefetched where a level prefetches its streams (the AVX-512 bf16 and int8 decode
// kernels; the AVX2 ones rely on the hardware prefetchers). Measured on AMD Zen 5: experience OPT-014.
constexpr std::size_t kStreamPrefetchBytes = 2048;

// tile(first_row, group_rows): rows first_row + g * group_rows for g < R. one(row): a single row.
template <int R, class Tile, class One>
inline void for_row_streams(int rows, Tile&& tile, One&& one) {
  const int n = rows / R;
  for (int i = 0; i < n; ++i) tile(i, n);
  for (int r = R * n; r < rows; ++r) one(r);
}

}  // namespace mi::kernels
