// The bench report (run_bench's JSON, format "metainfer-bench/1") as Markdown tables: the machine's limits, the
// workload matrix with every metric as mean +- stddev beside its bound, the baseline and the ratios, llama-bench-
// style pp/tg rows, the supplementary runs, skipped cells and errors.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace mi::bench {

std::string to_markdown(const nlohmann::json& report);

// "12.3 ± 0.4" with a precision that suits the magnitude ("12.3" for one run); "—" for null.
std::string format_stat(const nlohmann::json& stat);
std::string format_number(double v);

}  // namespace mi::bench
