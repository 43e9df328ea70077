#include "bench/workload.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "engine/bench_stats.h"

namespace mi::bench {

std::vector<Cell> Matrix::cells() const {
  std::vector<Cell> out;
  for (int p : prompts)
    for (int g : gens) out.push_back({p, g});
  return out;
}

Matrix matrix_named(const std::string& name) {
  if (name == "paper") return {"paper", {11, 256, 1021}, {256, 1024, 2048}, 1021, {128, 256, 512}};
  if (name == "quick") return {"quick", {11, 64}, {16, 32}, 64, {16, 32}};
  fail("--matrix: expected paper or quick, got \"", name, "\"");
}

Matrix with_lengths(Matrix m, const std::vector<int>& prompts, const std::vector<int>& gens) {
  for (int p : prompts)
    if (p < 1) fail("--prompts: every prompt length must be >= 1, got ", p);
  for (int g : gens)
    if (g < 2) fail("--gens: every generation length must be >= 2 (TPOT needs two tokens), got ", g);
  auto sorted = [](std::vector<int> v) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
    return v;
  };
  if (!prompts.empty()) {
    m.prompts = sorted(prompts);
    m.chunk_prompt = m.prompts.back();
  }
  if (!gens.empty()) m.gens = sorted(gens);
  return m;
}


nlohmann::json Stat::to_json() const {
  if (n == 0) return nullptr;
  return {{"mean", mean}, {"stddev", stddev}, {"n", n}};
}

// The same statistics ENGINE bench reports (one definition, components/engine/bench_stats.h).
Stat summarize(const std::vector<double>& values) {
  const engine::RunStat r = engine::summarize_runs(values);
  return {r.mean, r.stddev, r.n};
}

}  // namespace mi::bench
