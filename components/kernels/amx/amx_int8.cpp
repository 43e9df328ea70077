// The amx level's int8-weight kernels: the avx512 ones (kernels/avx512/avx512_int8_impl.h; the tile unit's int8
// product needs int8 activations, and precise numerics keep them f32), compiled here with this level's flags.
#include "kernels/amx/amx.h"
#include "kernels/avx512/avx512_int8_impl.h"

namespace mi::kernels {

void Amx::matvec(const int8_t* Q, const float* scale, std::size_t ld, const float* x, float* y, int rows, int cols) {
  avx512_int8::matvec(Q, scale, ld, x, y, rows, cols);
}
void Amx::matmul(const int8_t* Q, const float* scale, std::size_t ld, const float* X, std::size_t ldx, float* Y,
                 std::size_t ldy, int M, int rows, int cols) {
  avx512_int8::matmul(Q, scale, ld, X, ldx, Y, ldy, M, rows, cols);
}

}  // namespace mi::kernels
