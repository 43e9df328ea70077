#include "servebench/http_get.h"

#include <httplib.h>

#include <algorithm>

namespace mi::servebench {

HttpGetResult http_get(const ServerUrl& url, const std::string& path, double timeout_s) {
  httplib::Client client(url.host, url.port);
  const double t = std::clamp(timeout_s, 0.001, 30.0);
  const auto sec = time_t(t);
  const auto usec = time_t((t - double(sec)) * 1e6);
  client.set_connection_timeout(sec, usec);
  client.set_read_timeout(sec, usec);
  client.set_keep_alive(false);
  HttpGetResult out;
  const httplib::Result res = client.Get(url.base_path + path);
  if (!res) {
    out.error = httplib::to_string(res.error());
    return out;
  }
  out.connected = true;
  out.status = res->status;
  out.body = res->body;
  return out;
}

}  // namespace mi::servebench
