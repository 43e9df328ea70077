#include "agents/tool_catalog.h"

#include <algorithm>

#include "common/error.h"

namespace mi::agents {
namespace {

using nlohmann::json;

json object_schema(json properties, std::vector<std::string> required) {
  return {{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)},
          {"additionalProperties", false}};
}

const json kPath = {{"type", "string"},
                    {"description", "Relative to the run directory; '@ckb/...' names a file of the knowledge base (read-only)."}};

}  // namespace

const std::vector<ToolSpec>& tool_catalog() {
  static const std::vector<ToolSpec> catalog = {
      {"list_dir", "List a directory: one entry per line, directories end with '/'.", object_schema({{"path", kPath}}, {"path"})},
      {"read_file", "Read a text file, optionally a range of lines (1-based).",
       object_schema({{"path", kPath}, {"first_line", {{"type", "integer"}}}, {"max_lines", {{"type", "integer"}}}}, {"path"})},
      {"search_ckb", "Search the knowledge base (contracts, families, platforms, experience) for a case-insensitive substring; returns file:line: text.",
       object_schema({{"query", {{"type", "string"}}}}, {"query"})},
      {"write_file", "Create or replace a file with the given content (only inside this role's writable paths).",
       object_schema({{"path", kPath}, {"content", {{"type", "string"}}}}, {"path", "content"})},
      {"edit_file", "Replace exactly one occurrence of `old` with `new` in a file (only inside this role's writable paths).",
       object_schema({{"path", kPath}, {"old", {{"type", "string"}}}, {"new", {{"type", "string"}}}}, {"path", "old", "new"})},
      {"run_command", "Run a shell command (e.g. a build or a test) in the run directory, without network, with a time and output limit. Returns the exit status and the output's tail. Files it changes are held to your write paths like write_file: other changes are undone.",
       object_schema({{"command", {{"type", "string"}}}, {"timeout_s", {{"type", "number"}}}}, {"command"})},
  };
  return catalog;
}

bool is_known_tool(const std::string& name) {
  const auto& c = tool_catalog();
  return std::any_of(c.begin(), c.end(), [&](const ToolSpec& t) { return t.name == name; });
}

bool is_write_tool(const std::string& name) { return name == "write_file" || name == "edit_file"; }

std::vector<ToolSpec> tool_specs(const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (!is_known_tool(n)) fail("unknown tool '", n, "'");
  std::vector<ToolSpec> out;
  for (const ToolSpec& t : tool_catalog())
    if (std::find(names.begin(), names.end(), t.name) != names.end()) out.push_back(t);
  return out;
}

}  // namespace mi::agents
