// Token sampler (ckb/contracts/sampler.toml): turns one row of logits [V] into the next token id.
//
// Order of operations (fixed so that a run is reproducible from its parameters and seed):
//   1. repetition penalty over the distinct ids in `history` (CTRL, Keskar et al. 2019, sec. 4.1 as implemented
//      in practice: a positive logit is divided by the penalty, a negative one multiplied by it);
//   2. temperature == 0: greedy argmax (the lowest id wins a tie) - nothing below runs, no random draw is used;
//   3. logits / temperature;
//   4. top-k: keep the k largest logits (ties at the boundary broken towards the lower id); 0 = off;
//   5. softmax over the kept tokens;
//   6. top-p (nucleus, Holtzman et al. 2019): keep the smallest prefix of the tokens sorted by descending
//      probability (ties: lower id first) whose mass is >= top_p; 1 = off;
//   7. min-p: drop tokens whose probability is < min_p * the largest probability; 0 = off;
//   8. renormalise and draw: u = uniform [0, 1) * kept mass, walk the kept tokens in ascending id order and
//      take the first whose running mass exceeds u.
// The random stream is xoshiro256** (Blackman & Vigna, "Scrambled linear pseudorandom number generators",
// 2018) whose 256-bit state is filled by splitmix64 from the 64-bit seed, as its authors recommend. Exactly one
// 64-bit draw is consumed per sampled (non-greedy) token.
//
// All buffers are sized for the vocabulary at construction; sample() allocates nothing.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace mi::runtime {

struct SamplingParams {
  float temperature = 0.0f;         // >= 0; 0 = greedy
  int top_k = 0;                    // >= 0; 0 = off
  float top_p = 1.0f;               // (0, 1]; 1 = off
  float min_p = 0.0f;               // [0, 1); 0 = off
  float repetition_penalty = 1.0f;  // > 0; 1 = off
  uint64_t seed = 0;
};

// Throws mi::Error naming the first parameter outside its range (see SamplingParams).
void validate(const SamplingParams& params);

// xoshiro256** 1.0 seeded through splitmix64 (both public-domain algorithms by Vigna; written from the paper).
class Xoshiro256StarStar {
 public:
  explicit Xoshiro256StarStar(uint64_t seed);
  uint64_t next();
  // Uniform double in [0, 1) from the top 53 bits of one draw.
  double uniform();

 private:
  uint64_t s_[4];
};

class Sampler {
 public:
  // Validates `params` (mi::Error naming the parameter) and sizes every buffer for `vocab_size` ids.
  Sampler(const SamplingParams& params, int vocab_size);

  // logits: [vocab_size] (not modified). history: the ids seen so far (prompt and generated) for the
  // repetition penalty; each must be in [0, vocab_size). Throws mi::Error on a wrong-sized row, an id out of
  // range, a NaN or +inf logit, or a row in which every logit is -inf.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  const SamplingParams& params() const { return params_; }
  int vocab_size() const { return vocab_size_; }

 private:
  void load_penalized(std::span<const float> logits, std::span<const int32_t> history);
  int32_t argmax() const;
  int32_t draw();

  SamplingParams params_;
  int vocab_size_;
  Xoshiro256StarStar rng_;
  std::vector<float> work_;         // [V] penalised (then scaled) logits, then probabilities
  std::vector<int32_t> candidates_;  // [V] ids still in play
  std::vector<uint32_t> seen_;      // [V] stamp of the last sample() that penalised this id
  uint32_t stamp_ = 0;
};

}  // namespace mi::runtime
