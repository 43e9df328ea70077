// serve-bench's deterministic prompts: the same bytes or ids on every run, so runs compare.
//  - text_prompt(n): n words, each one token in the common BPE vocabularies (Qwen, Llama 3, GPT-2 families:
//    " the", " of", ...) in a fixed pseudo-random order; the server's usage.prompt_tokens reports the exact count.
//  - id_prompt(n): n token ids in [100, 1100), a fixed pseudo-random sequence, for servers without a tokenizer
//    (sent as "prompt": [ids...] to /v1/completions).
#pragma once
#include <string>
#include <vector>

namespace mi::servebench {

std::string text_prompt(int words);
std::vector<int> id_prompt(int n);

}  // namespace mi::servebench
