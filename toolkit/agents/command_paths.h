// Which reference tree a shell command names, judged by paths, not by text: every word of the command (and each
// part of a word after '=' or ':', as in --file=PATH or a PATH-like list, and the path of an option such as
// -I/path) is resolved against the directory the command runs in, canonicalised (symlinks, "." and "..") and
// compared with each reference tree by whole path components, so /ref/vllm-other is not inside /ref/vllm while
// /ref/vllm/../vllm/x and a link to the tree are. A word with a wildcard (*, ?, [) names a tree when its part before
// the first wildcard lies in the tree, or when that first wildcard segment could match the next segment on the way
// to the tree (conservative: `ls /re*` is refused when /ref/vllm is a reference).
//
// This is the sandbox's first line, which turns an attempt into a counted violation before anything runs. It cannot
// see a path the command builds at run time ($(...), variables, base64); the isolation the command runs in
// (isolated_command.h) keeps the trees out of its reach either way.
#pragma once
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace mi::agents {

// True when `path` is `root` or lies below it, by whole components (both canonical).
bool path_within(const std::filesystem::path& path, const std::filesystem::path& root);

// The words of a shell command as the shell would split them for a simple command: whitespace and the operators
// ; | & < > ( ) ` separate words; quotes group and are removed; a backslash escapes the next character.
std::vector<std::string> shell_words(const std::string& command);

// The first reference tree (as given in `references`, which must be canonical) that `command`, run in `cwd`, names.
// wildcard_reach = false drops the conservative rule for wildcards: a word names a tree only when its part before the
// first wildcard lies in it (`cat transcripts/*` names transcripts/, `grep x *` does not), for paths that lie where
// ordinary commands glob (the workflow's records at the top of the run directory).
std::optional<std::filesystem::path> named_reference_tree(const std::string& command, const std::filesystem::path& cwd,
                                                          const std::vector<std::filesystem::path>& references,
                                                          bool wildcard_reach = true);

// Whether a word of `command` with a wildcard, resolved against `cwd`, could match exactly `path` (segment by segment,
// a leading '.' matched only by a '.'), so that the shell's expansion of it explains an access to `path`
// (`grep x *` opening metrics.json). Lexical: no symlinks are resolved.
bool wildcard_may_name(const std::string& command, const std::filesystem::path& cwd, const std::filesystem::path& path);

}  // namespace mi::agents
