// Foreign framework sources installed in the system directories that isolated commands see. Commands get the
// system's /usr and /etc read-only (compilers, libraries, Python); a reference tree installed there (pip's
// /usr/local/lib/python3.X/dist-packages/transformers, a distribution's /usr/lib/python3/dist-packages/vllm,
// llama.cpp's headers in /usr/include) would be readable by every command, and the signature scan of the run
// directory never looks there. Scanning all of /usr for signatures is too slow for every command, so the rule is:
//   - in every Python package directory (usr/{,local/}{lib,lib64}/python3*/{site,dist}-packages), a
//     package or module named like a framework (vllm, sglang, transformers, llama_cpp, gguf, ggml), and any other
//     package whose __init__.py, or module whose .py file, carries a foreign signature (source_switch.h): a renamed
//     copy is found by its first file;
//     packages inside an egg directory (<name>-<version>.egg/) count as packages of the directory;
//     a zipped egg (<framework>-<version>.egg, a file) by its name;
//   - usr/{,local/}{share,include,lib,src}/<framework>[-_.<version>] entries, and headers named ggml*.h / llama*.h /
//     gguf*.h in usr/{,local/}include;
//   - scripts (#! or .py / .sh) in usr/{,local/}{bin,sbin} whose text carries a foreign signature (llama.cpp's install
//     puts convert_hf_to_gguf.py in /usr/local/bin).
// Not scanned (a known limit): other files under /usr. A source tree copied there under a name no rule above knows
// stays visible to commands, and only output that itself carries a signature is withheld; configure such a tree as
// a reference path (--reference), which every command and gate hides.
// run_isolated_command hides all of them from every command and gate (an empty tmpfs over a directory, /dev/null
// over a file), so it holds whatever the caller passes.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace mi::agents {

// The foreign trees under `root` (a system's "/"; tests plant one elsewhere), as paths under `root`, sorted.
std::vector<std::filesystem::path> system_reference_trees(const std::filesystem::path& root);

// system_reference_trees("/"), found once per process.
const std::vector<std::filesystem::path>& host_system_reference_trees();

// bubblewrap arguments that cover each of `paths` that exists (an empty tmpfs over a directory, /dev/null over a
// file; a symlink's target, since a link cannot be mounted over); appended after the mounts that expose them.
void append_bwrap_hides(std::vector<std::string>& argv, const std::vector<std::filesystem::path>& paths);

}  // namespace mi::agents
