// '*'-only glob matching, used for CKB test-name patterns and weight-name patterns.
#pragma once
#include <string>

namespace mi::ckb {
// '*' matches any run of characters (also empty); every other character matches itself.
bool glob_match(const std::string& pattern, const std::string& text);
}  // namespace mi::ckb
