#include "servebench/sse_parser.h"

namespace mi::servebench {

bool SseParser::feed(std::string_view bytes) {
  if (stopped_) return false;
  while (!bytes.empty()) {
    const std::size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      if (partial_.size() > max_line_bytes_) {
        error_ = "an SSE line is longer than " + std::to_string(max_line_bytes_) + " bytes";
        stopped_ = true;
        return false;
      }
      return true;
    }
    bool go;
    if (partial_.empty()) {
      go = line(bytes.substr(0, nl));
    } else {
      partial_.append(bytes.substr(0, nl));
      std::string whole = std::move(partial_);
      partial_.clear();
      go = line(whole);
    }
    bytes.remove_prefix(nl + 1);
    if (!go) {
      stopped_ = true;
      return false;
    }
  }
  return true;
}

bool SseParser::finish() {
  if (stopped_) return false;
  if (!partial_.empty()) {
    std::string last = std::move(partial_);
    partial_.clear();
    if (!line(last)) return stopped_ = true, false;
  }
  if (has_data_ && !dispatch()) return stopped_ = true, false;
  return true;
}

bool SseParser::line(std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  if (text.empty()) return has_data_ ? dispatch() : true;
  if (text.front() == ':') return true;  // comment (keep-alive pings)
  const std::size_t colon = text.find(':');
  const std::string_view field = text.substr(0, colon);
  if (field != "data") return true;  // event:, id:, retry: and unknown fields carry nothing serve-bench needs
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
  return true;
}

bool SseParser::dispatch() {
  std::string data = std::move(data_);
  data_.clear();
  has_data_ = false;
  return on_event_(data);
}

}  // namespace mi::servebench
