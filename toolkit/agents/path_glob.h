// Globs over '/'-separated relative paths, for role write permissions and protected files: "**" matches any number
// of whole segments (also none), '*' and '?' match within one segment, so "src/*.cpp" never reaches into
// src/sub/ and "tests/**" covers the whole tree. Patterns are data in the CKB role files.
#pragma once
#include <string>
#include <vector>

namespace mi::agents {

bool path_glob_match(const std::string& pattern, const std::string& relative_path);
bool path_glob_any(const std::vector<std::string>& patterns, const std::string& relative_path);

}  // namespace mi::agents
