// An error answered to an HTTP client in the OpenAI error shape (https://platform.openai.com/docs/guides/error-codes):
//
//   HTTP <status>   {"error": {"message": "...", "type": "invalid_request_error", "param": "max_tokens", "code": null}}
//
// Bad input is always a 4xx naming the field (`param`) and what was expected; 5xx only for the server's own failures.
#pragma once
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace mi::server {

class ApiError : public Error {
 public:
  ApiError(int status, std::string type, std::string message, std::string param = {}, std::string code = {})
      : Error(message), status_(status), type_(std::move(type)), param_(std::move(param)), code_(std::move(code)) {}

  int status() const { return status_; }
  const std::string& type() const { return type_; }
  const std::string& param() const { return param_; }
  const std::string& code() const { return code_; }

  nlohmann::ordered_json to_json() const {
    nlohmann::ordered_json e;
    e["message"] = what();
    e["type"] = type_;
    e["param"] = param_.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(param_);
    e["code"] = code_.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(code_);
    return {{"error", e}};
  }

 private:
  int status_;
  std::string type_;
  std::string param_;
  std::string code_;
};

// 400: a field is missing, of the wrong type or out of range.
inline ApiError bad_field(const std::string& param, const std::string& message) {
  return ApiError(400, "invalid_request_error", param + ": " + message, param);
}

}  // namespace mi::server
