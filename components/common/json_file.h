// Reading a JSON file with errors that name the file (and the byte position of a syntax error).
#pragma once
#include <filesystem>

#include <nlohmann/json.hpp>

namespace mi {
nlohmann::json read_json_file(const std::filesystem::path& path);
}  // namespace mi
