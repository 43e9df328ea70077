// Checkpoints the acceptance gate derives from the engine's own, so that no table of known answers can pass it:
// a copy with one tensor perturbed at random, and a checkpoint of the same shape with fresh random weights. Both
// hold config.json and the weights only, in the stored dtype.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace mi::gates {

struct Perturbation {
  std::string tensor;  // the tensor changed
  std::string how;     // "sign flip" or "scaled by F"
};

// Copies `from` (config.json + weights) to `to` with one tensor, chosen with `seed`, negated or scaled by a random
// factor in [0.5, 0.8] (a two-dimensional tensor: a projection or the embedding). Never scaled up: see the .cpp.
Perturbation write_perturbed_checkpoint(const std::filesystem::path& from, const std::filesystem::path& to, uint64_t seed);

// Writes `to`: config.json of `from` and, for every tensor of `from`, one of the same name, shape and dtype drawn
// from N(mean, std) of that tensor (norm weights stay around their mean, projections around zero), from `seed`.
void write_fresh_weights_like(const std::filesystem::path& from, const std::filesystem::path& to, uint64_t seed);

}  // namespace mi::gates
