// The avx512bf16 level's int8-weight kernels: the avx512 ones (kernels/avx512/avx512_int8_impl.h; VDPBF16PS needs
// bf16 operands, and int8 weights with f32 activations have none), compiled here with this level's flags.
#include "kernels/avx512bf16/avx512bf16.h"
#include "kernels/avx512/avx512_int8_impl.h"

namespace mi::kernels {

void Avx512Bf16::matvec(const int8_t* Q, const float* scale, std::size_t ld, const float* x, float* y, int rows,
                    int cols) {
  avx512_int8::matvec(Q, scale, ld, x, y, rows, cols);
}
void Avx512Bf16::matmul(const int8_t* Q, const float* scale, std::size_t ld, const float* X, std::size_t ldx, float* Y,
                    std::size_t ldy, int M, int rows, int cols) {
  avx512_int8::matmul(Q, scale, ld, X, ldx, Y, ldy, M, rows, cols);
}

}  // namespace mi::kernels
