// Scalar reference kernels for int8 weights with one f32 scale per row (ckb/contracts/int8_weights.toml):
// y[r] = scale[r] * sum_c float(Q[r, c]) * x[c], summed left to right in f32, then scaled once. The oracle every
// other level's int8 kernels are tested against (tests/unit/kernels/int8_test.cpp).
#include "kernels/scalar/scalar.h"

namespace mi::kernels {

void Scalar::matvec(const int8_t* Q, const float* scale, std::size_t ld, const float* x, float* y, int rows,
                    int cols) {
  for (int r = 0; r < rows; ++r) {
    const int8_t* row = Q + std::size_t(r) * ld;
    float acc = 0.0f;
    for (int c = 0; c < cols; ++c) acc += float(row[c]) * x[c];
    y[r] = scale[r] * acc;
  }
}

void Scalar::matmul(const int8_t* Q, const float* scale, std::size_t ld, const float* X, std::size_t ldx, float* Y,
                    std::size_t ldy, int M, int rows, int cols) {
  for (int m = 0; m < M; ++m) matvec(Q, scale, ld, X + std::size_t(m) * ldx, Y + std::size_t(m) * ldy, rows, cols);
}

}  // namespace mi::kernels
