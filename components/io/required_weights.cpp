#include "io/required_weights.h"

#include "common/error.h"

namespace mi::io {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) text += (i ? ", " : "") + std::to_string(shape[i]);
  return text + "]";
}

}  // namespace

void check_required_weights(const WeightStore& store, const std::vector<RequiredTensor>& required, DType expected) {
  constexpr std::size_t kMaxListed = 20;  // enough to see the pattern; the count says how many there are
  std::vector<std::string> problems;
  for (const RequiredTensor& tensor : required) {
    const TensorView* view = store.find(tensor.name);
    if (view == nullptr) {
      problems.push_back("tensor '" + tensor.name + "' is missing (expected shape " + shape_text(tensor.shape) + ")");
      continue;
    }
    if (view->shape != tensor.shape)
      problems.push_back("tensor '" + tensor.name + "': expected shape " + shape_text(tensor.shape) + ", got " +
                         shape_text(view->shape) + " (in " + view->file + ")");
    if (view->dtype != expected)
      problems.push_back("tensor '" + tensor.name + "': expected dtype " + dtype_name(expected) + ", got " +
                         dtype_name(view->dtype) + " (in " + view->file + ")");
  }
  if (problems.empty()) return;
  std::string message = store.dir().string() + ": checkpoint does not match the model (" +
                        std::to_string(problems.size()) + " problem" + (problems.size() == 1 ? "" : "s") + "):";
  for (std::size_t i = 0; i < problems.size() && i < kMaxListed; ++i) message += "\n  " + problems[i];
  if (problems.size() > kMaxListed) message += "\n  ... and " + std::to_string(problems.size() - kMaxListed) + " more";
  fail(message);
}

}  // namespace mi::io
