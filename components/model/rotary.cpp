#include "model/rotary.h"

#include <cmath>

namespace mi::model {

std::vector<double> rotary_inv_freq(int head_dim, double theta, const std::optional<Llama3RopeScaling>& scaling) {
  if (head_dim <= 0 || head_dim % 2 != 0) fail("rotary: head_dim must be a positive even number, got ", head_dim);
  if (!(theta > 0.0)) fail("rotary: rope_theta must be positive, got ", theta);
  const int half = head_dim / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));
  for (int i = 0; i < half; ++i) inv_freq[std::size_t(i)] = 1.0 / std::pow(theta, double(2 * i) / double(head_dim));
  if (!scaling) return inv_freq;

  const Llama3RopeScaling& s = *scaling;
  if (!(s.factor > 0.0) || !(s.low_freq_factor > 0.0) || !(s.high_freq_factor > s.low_freq_factor) ||
      s.original_max_position_embeddings <= 0)
    fail("rotary: llama3 rope_scaling expects factor > 0, 0 < low_freq_factor < high_freq_factor and "
         "original_max_position_embeddings > 0; got factor ", s.factor, ", low_freq_factor ", s.low_freq_factor,
         ", high_freq_factor ", s.high_freq_factor, ", original_max_position_embeddings ",
         s.original_max_position_embeddings);
  const double pi = std::acos(-1.0);
  const double original = double(s.original_max_position_embeddings);
  const double low_freq_wavelen = original / s.low_freq_factor;
  const double high_freq_wavelen = original / s.high_freq_factor;
  for (double& f : inv_freq) {
    const double wavelen = 2.0 * pi / f;
    if (wavelen < high_freq_wavelen) continue;
    if (wavelen > low_freq_wavelen) {
      f = f / s.factor;
    } else {
      const double smooth = (original / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
      f = (1.0 - smooth) * f / s.factor + smooth * f;
    }
  }
  return inv_freq;
}

RotaryTable::RotaryTable(int head_dim, int max_positions, double theta,
                         const std::optional<Llama3RopeScaling>& scaling, int rotary_dim)
    : head_dim_(head_dim), rotary_dim_(rotary_dim == 0 ? head_dim : rotary_dim), max_positions_(max_positions) {
  if (max_positions <= 0) fail("rotary: max_positions must be positive, got ", max_positions);
  if (rotary_dim_ <= 0 || rotary_dim_ % 2 != 0 || rotary_dim_ > head_dim)
    fail("rotary: rotary_dim must be even and in (0, head_dim = ", head_dim, "], got ", rotary_dim_);
  // Partial rotary: the frequencies are those of a head of size rotary_dim.
  const std::vector<double> inv_freq = rotary_inv_freq(rotary_dim_, theta, scaling);
  const int half = rotary_dim_ / 2;
  cos_.resize(std::size_t(max_positions) * std::size_t(half));
  sin_.resize(cos_.size());
  for (int pos = 0; pos < max_positions; ++pos) {
    for (int i = 0; i < half; ++i) {
      // f32 angle as in the reference (position and inv_freq in f32, one f32 product), then cos/sin of it.
      const float angle = float(pos) * float(inv_freq[std::size_t(i)]);
      cos_[std::size_t(pos) * half + i] = float(std::cos(double(angle)));
      sin_[std::size_t(pos) * half + i] = float(std::sin(double(angle)));
    }
  }
}

}  // namespace mi::model
