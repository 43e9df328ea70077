// C++ source text with everything that is not code blanked: comments, string and character literals (raw strings
// included) and line splices. What remains are the identifiers, numbers and punctuation the compiler parses, so a
// scanner looking for macro uses or preprocessor directives is not fooled by "TEST(A, B)" inside a string, a raw
// string holding a whole fake test file, a test in a comment, or a macro split across lines by a backslash.
//
// Used by the L1 stage gate twice: to list the tests a contract declares, and to find preprocessor directives in the
// engine's sources that touch GoogleTest's macros.
#pragma once
#include <string>

namespace mi::gates {

// The code of `source`: each comment becomes one space, each literal becomes an empty literal ("" or ''), and a
// backslash-newline disappears (as in translation phase 2). Newlines outside comments and literals are kept, so
// preprocessor directives stay one per line.
std::string cpp_code_text(const std::string& source);

}  // namespace mi::gates
