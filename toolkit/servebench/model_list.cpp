#include "servebench/model_list.h"

#include <httplib.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "servebench/sse_client.h"

namespace mi::servebench {

std::vector<std::string> list_models(const ServerUrl& url, double timeout_s) {
  httplib::Client client(url.host, url.port);
  const double t = std::clamp(timeout_s, 0.001, 30.0);
  const auto sec = time_t(t);
  const auto usec = time_t((t - double(sec)) * 1e6);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_keep_alive(false);
  const std::string where = url.text + "/v1/models";
  const httplib::Result res = client.Get(url.base_path + "/v1/models");
  if (!res) fail("GET ", where, ": ", httplib::to_string(res.error()), " (is the server running?)");
  if (res->status != 200) fail("GET ", where, ": ", http_error_message(res->status, res->body));
  const nlohmann::json j = nlohmann::json::parse(res->body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("data") || !j["data"].is_array())
    fail("GET ", where, ": expected a JSON object with a 'data' array, got: ", res->body.substr(0, 200));
  std::vector<std::string> ids;
  for (const nlohmann::json& m : j["data"])
    if (m.is_object() && m.contains("id") && m["id"].is_string()) ids.push_back(m["id"].get<std::string>());
  return ids;
}

}  // namespace mi::servebench
