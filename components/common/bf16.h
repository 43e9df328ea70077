// bfloat16 storage type: the upper 16 bits of an IEEE-754 float32 (Google Brain bfloat16; same exponent range
// as float32, 8-bit significand). Widening is exact; narrowing rounds to nearest even, as PyTorch's
// .to(torch.bfloat16) does, with NaN kept quiet.
#pragma once
#include <cstdint>
#include <cstring>

namespace mi {

struct bf16_t {
  uint16_t bits;
};
static_assert(sizeof(bf16_t) == 2);

inline float bf16_to_f32(bf16_t v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline bf16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16_t{uint16_t((u >> 16) | 0x40)};  // NaN stays NaN (quiet)
  uint32_t rounding_bias = 0x7fffu + ((u >> 16) & 1u);                            // round to nearest even
  return bf16_t{uint16_t((u + rounding_bias) >> 16)};
}

}  // namespace mi
