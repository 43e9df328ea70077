#include "agents/llm_types.h"

namespace mi::agents {

const char* role_name(Role r) {
  switch (r) {
    case Role::user: return "user";
    case Role::assistant: return "assistant";
    case Role::tool: return "tool";
  }
  return "?";
}

}  // namespace mi::agents
