// "Lines changed" for the run metrics: how many lines an edit added and removed, counted as the difference of the
// two files' line multisets. Cheaper than a real diff and never larger than one; a moved line counts as unchanged,
// which is what a measure of how much an agent wrote should do.
#pragma once
#include <string_view>

namespace mi::agents {

struct LineDelta {
  long added = 0, removed = 0;
};

LineDelta line_delta(std::string_view before, std::string_view after);

}  // namespace mi::agents
