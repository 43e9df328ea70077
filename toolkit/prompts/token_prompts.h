// Deterministic prompts of token ids for the gates and the benchmarks: the golden traces' prompt generator
// (tests/data/golden/README.md), a linear congruential sequence per prompt, so every engine and every run sees the
// same ids; and the "1,2,3" form the engine command line takes.
#pragma once
#include <string>
#include <vector>

namespace mi::prompts {

// `length` ids in [1, vocab) of prompt number `index` (x0 = 12345 + index, x = (1103515245 x + 12345) mod 2^31,
// id = 1 + x mod (vocab - 1)).
std::vector<int> golden_prompt(int index, int length, int vocab);

// "1,2,3"
std::string ids_text(const std::vector<int>& ids);

}  // namespace mi::prompts
