// What `metainfer bench` runs: the workload matrix (prompt lengths x generation lengths), the prompt ids, and the
// mean +- stddev of repeated runs.
//   paper   prompts 11, 256, 1021 x generation 256, 1024, 2048 (the paper's 3x3 matrix); chunked prefill at
//           p = 1021 with chunks 128, 256, 512 vs none
//   quick   prompts 11, 64 x generation 16, 32 (CI-sized, for tiny checkpoints); chunked prefill at p = 64 with
//           chunks 16, 32 vs none
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::bench {

struct Cell {
  int prompt_tokens = 0;
  int gen_tokens = 0;
};

struct Matrix {
  std::string name;
  std::vector<int> prompts, gens;   // ascending
  int chunk_prompt = 0;             // prompt length of the chunked-prefill study
  std::vector<int> prefill_chunks;  // chunks compared with no chunking
  std::vector<Cell> cells() const;  // prompts x gens, prompt-major
};

// "paper" or "quick"; mi::Error naming the choices otherwise.
Matrix matrix_named(const std::string& name);

// The matrix with the prompt or generation lengths replaced (empty keeps them); mi::Error when a prompt length is
// < 1 or a generation length < 2 (TPOT needs two tokens).
Matrix with_lengths(Matrix m, const std::vector<int>& prompts, const std::vector<int>& gens);

// Mean and sample standard deviation (n - 1; 0 for n < 2) of the finite values; n counts them.
struct Stat {
  double mean = 0, stddev = 0;
  int n = 0;
  nlohmann::json to_json() const;  // {"mean", "stddev", "n"}, or null when n == 0
};
Stat summarize(const std::vector<double>& values);

}  // namespace mi::bench
