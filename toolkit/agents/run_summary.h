// The Markdown summary of a run (run_dir/summary.md): the totals in the paper's Table 1 terms, one row per
// conversation, and every violation and reference access, for a person to read after the run.
#pragma once
#include <string>

namespace mi::agents {

struct RunMetrics;

std::string render_run_summary(const RunMetrics& metrics);

}  // namespace mi::agents
