#include "common/json_file.h"

#include <fstream>
#include <sstream>

#include "common/error.h"

namespace mi {

nlohmann::json read_json_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path.string(), ": cannot open file");
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return nlohmann::json::parse(buffer.str());
  } catch (const nlohmann::json::parse_error& e) {
    fail(path.string(), ": not valid JSON (byte ", e.byte, "): ", e.what());
  }
}

}  // namespace mi
