// Generated C++ is formatted like written C++: the text goes through clang-format with the repository's committed
// style (.clang-format at the repository root), so a reader of an engine's model.h sees wrapped lines and aligned
// blocks instead of the emitter's string concatenation. Deterministic for a given clang-format version, which the
// L0 gate relies on when it regenerates an engine and compares the bytes.
#pragma once
#include <string>

namespace mi::generator {

// `text` formatted as the file `name` (its extension picks the language). mi::Error naming what is missing when
// clang-format cannot be run (Debian package clang-format; ./setup.sh installs it) or rejects the text.
std::string format_cpp(const std::string& text, const std::string& name);

}  // namespace mi::generator
