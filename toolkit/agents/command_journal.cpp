#include "agents/command_journal.h"

#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mi::agents {
namespace fs = std::filesystem;
using nlohmann::json;

fs::path command_journal_path(const fs::path& run_dir) { return run_dir / ".metainfer" / "command_in_flight.cbor"; }

void write_command_journal(const fs::path& run_dir, const CommandJournal& j) {
  // CBOR with the file contents as byte strings: a run directory may hold bytes that are not UTF-8.
  json entries = json::array();
  for (const auto& [path, e] : j.before)
    entries.push_back({{"path", path}, {"bytes", json::binary(std::vector<std::uint8_t>(e.bytes.begin(), e.bytes.end()))},
                       {"symlink", e.symlink}, {"links", e.links}, {"fingerprint", e.fingerprint}, {"scratch", e.scratch}});
  const std::vector<std::uint8_t> bytes =
      json::to_cbor(json{{"role", j.role}, {"command", j.command}, {"git_existed", j.git_existed},
           {"switch", to_string(j.source_switch)}, {"gate", j.gate}, {"before", entries}});
  const fs::path file = command_journal_path(run_dir), tmp = file.string() + ".tmp";
  fs::create_directories(file.parent_path());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    out.flush();
    if (!out) fail(tmp.string(), ": cannot write the journal of the command about to run");
  }
  fs::rename(tmp, file);
}

std::optional<CommandJournal> read_command_journal(const fs::path& run_dir) {
  const fs::path file = command_journal_path(run_dir);
  if (!fs::exists(file)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  const std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  const json j = json::from_cbor(bytes, true, false);
  if (j.is_discarded() || !j.is_object()) fail(file.string(), ": the journal of an interrupted command cannot be read");
  CommandJournal out;
  try {
    out.role = j.at("role").get<std::string>();
    out.command = j.at("command").get<std::string>();
    out.git_existed = j.at("git_existed").get<bool>();
    out.source_switch = parse_source_switch(j.at("switch").get<std::string>());
    out.gate = j.value("gate", false);  // journals written before gates were journaled are commands'
    for (const json& e : j.at("before")) {
      const auto& b = e.at("bytes").get_binary();
      out.before.emplace(e.at("path").get<std::string>(),
                         SnapshotEntry{std::string(b.begin(), b.end()), e.at("symlink").get<bool>(), e.at("links").get<std::uintmax_t>(),
                                       e.at("fingerprint").get<bool>(), e.at("scratch").get<bool>()});
    }
  } catch (const json::exception& e) {
    fail(file.string(), ": the journal of an interrupted command cannot be read: ", e.what());
  }
  return out;
}

void clear_command_journal(const fs::path& run_dir) {
  std::error_code ec;
  fs::remove(command_journal_path(run_dir), ec);
}

}  // namespace mi::agents
