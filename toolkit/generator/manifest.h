// MANIFEST.json of a generated engine (format "metainfer-manifest/1"): every file with its source component,
// contract, sha256 and line count; the constraints; the CKB version. The engine binary embeds the manifest's own
// sha256 (CMake computes it at configure time), which L0 provenance checks.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mi::generator {

std::string sha256_hex(const std::string& bytes);
std::string sha256_file(const std::filesystem::path& file);
std::string read_file(const std::filesystem::path& file);
void write_file(const std::filesystem::path& file, const std::string& bytes);
int count_lines(const std::string& text);

struct ManifestEntry {
  std::string path;       // relative to the engine directory
  std::string component;  // component id, or "generated:<what>"
  std::string contract;   // contract id the file implements (or "engine", "test_contracts")
  std::string sha256;
  int lines = 0;
};

// Files of an engine directory that belong in the manifest: everything except MANIFEST.json, build/ and reports/.
std::vector<std::string> engine_source_files(const std::filesystem::path& engine_dir);

}  // namespace mi::generator
