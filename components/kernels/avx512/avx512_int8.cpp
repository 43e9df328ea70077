// The avx512 level's int8-weight kernels (kernels/avx512/avx512_int8_impl.h).
#include "kernels/avx512/avx512.h"
#include "kernels/avx512/avx512_int8_impl.h"

namespace mi::kernels {

void Avx512::matvec(const int8_t* Q, const float* scale, std::size_t ld, const float* x, float* y, int rows,
                    int cols) {
  avx512_int8::matvec(Q, scale, ld, x, y, rows, cols);
}
void Avx512::matmul(const int8_t* Q, const float* scale, std::size_t ld, const float* X, std::size_t ldx, float* Y,
                    std::size_t ldy, int M, int rows, int cols) {
  avx512_int8::matmul(Q, scale, ld, X, ldx, Y, ldy, M, rows, cols);
}

}  // namespace mi::kernels
