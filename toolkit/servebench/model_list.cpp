#include "servebench/model_list.h"

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "servebench/http_get.h"
#include "servebench/sse_client.h"

namespace mi::servebench {

std::vector<std::string> list_models(const ServerUrl& url, double timeout_s) {
  const std::string where = url.text + "/v1/models";
  const HttpGetResult res = http_get(url, "/v1/models", timeout_s);
  if (!res.connected) fail("GET ", where, ": ", res.error, " (is the server running?)");
  if (res.status != 200) fail("GET ", where, ": ", http_error_message(res.status, res.body));
  const nlohmann::json j = nlohmann::json::parse(res.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array())
    fail("GET ", where, ": expected a JSON object with a 'data' array, got: ", res.body.substr(0, 200));
  std::vector<std::string> ids;
  for (const nlohmann::json& m : j["data"])
    if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"].get<std::string>());
  return ids;
}

}  // namespace mi::servebench
