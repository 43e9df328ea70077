// The served model names: GET /v1/models, the `id` of each entry of `data`. serve-bench's default --model is the
// first. Throws mi::Error naming the URL when the server cannot be reached or answers something else.
#pragma once
#include <string>
#include <vector>

#include "servebench/loopback_url.h"

namespace mi::servebench {

std::vector<std::string> list_models(const ServerUrl& url, double timeout_s);

}  // namespace mi::servebench
