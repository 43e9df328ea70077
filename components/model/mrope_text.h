// Interleaved multimodal rotary (M-RoPE) for text positions (Qwen3.5 / Qwen3.6: rope_parameters.mrope_section
// [t, h, w] with mrope_interleaved). Each rotary frequency i in [0, rotary_dim/2) takes its position from one axis:
//   h if i % 3 == 1 and i < 3 * section[1],   w if i % 3 == 2 and i < 3 * section[2],   t otherwise
// (the interleaved layout of the Qwen3-VL technical report; HF apply_interleaved_mrope). A text token's position ids
// are the same on all three axes (its index in the sequence), so every frequency rotates by the plain position and
// M-RoPE reduces exactly to the partial rotary of model/rotary.h. Engines take token ids only (no vision tower), so
// every input they accept is text: they use RotaryTable and check here, once, that the sections fit the rotary dims.
#pragma once
#include <array>

#include "common/error.h"

namespace mi::model {

enum class MropeAxis { t = 0, h = 1, w = 2 };

inline MropeAxis mrope_axis(int frequency, const std::array<int, 3>& section) {
  if (frequency % 3 == 1 && frequency < 3 * section[1]) return MropeAxis::h;
  if (frequency % 3 == 2 && frequency < 3 * section[2]) return MropeAxis::w;
  return MropeAxis::t;
}

// The position frequency i rotates by, for a token at (t, h, w).
inline int mrope_position(int frequency, const std::array<int, 3>& section, const std::array<int, 3>& thw) {
  return thw[static_cast<int>(mrope_axis(frequency, section))];
}

// The sections must cover the rotary frequencies exactly (t + h + w = rotary_dim / 2), each non-negative.
inline void check_text_mrope(const std::array<int, 3>& section, int rotary_dim) {
  if (section[0] < 0 || section[1] < 0 || section[2] < 0 || section[0] + section[1] + section[2] != rotary_dim / 2)
    fail("config.json: rope_parameters.mrope_section [", section[0], ", ", section[1], ", ", section[2],
         "] must sum to rotary_dim / 2 = ", rotary_dim / 2);
}

}  // namespace mi::model
