// The bench report as a hand-written SVG chart (no dependencies): two panels, decode tokens/s and prefill tokens/s,
// each with one group of bars per cell: ours (mean, with a +-stddev whisker), the baseline when there is one, and the
// bound. Logarithmic y axis, since bounds of small models sit orders of magnitude above the measurements.
#pragma once
#include <string>

#include <nlohmann/json.hpp>

namespace mi::bench {

std::string to_svg(const nlohmann::json& report);

}  // namespace mi::bench
