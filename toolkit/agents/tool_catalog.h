// The tools an agent can be granted, with the JSON Schema of each one's arguments as the LLM sees it. The names are
// the vocabulary of ckb/roles/*.toml (`tools = [...]`); lint refuses a role naming anything else, so a role file can
// never grant a capability the sandbox does not implement (and police).
#pragma once
#include <string>
#include <vector>

#include "agents/llm_types.h"

namespace mi::agents {

const std::vector<ToolSpec>& tool_catalog();
bool is_known_tool(const std::string& name);
// Tools that change files: a role with one of them must declare write_paths, and one without must not.
bool is_write_tool(const std::string& name);
// The specs of `names`, in the catalogue's order; throws mi::Error for an unknown name.
std::vector<ToolSpec> tool_specs(const std::vector<std::string>& names);

}  // namespace mi::agents
