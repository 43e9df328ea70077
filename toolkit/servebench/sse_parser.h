// Incremental Server-Sent Events parser for streamed OpenAI responses. Bytes arrive in arbitrary pieces (one TCP
// read, one HTTP chunk); feed() buffers a partial line until its end arrives. An event is the `data:` lines up to a
// blank line, joined with '\n' (one optional space after "data:" is dropped). Comment lines (":") and the other
// fields (event:, id:, retry:) are ignored. Lines end with "\n" or "\r\n".
#pragma once
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace mi::servebench {

class SseParser {
 public:
  // Receives each complete event's data; return false to stop parsing (feed() then returns false too).
  using EventHandler = std::function<bool(std::string_view data)>;

  explicit SseParser(EventHandler on_event, std::size_t max_line_bytes = std::size_t(16) << 20)
      : on_event_(std::move(on_event)), max_line_bytes_(max_line_bytes) {}

  // False when the handler stopped parsing or a line grew past max_line_bytes (error() says which).
  bool feed(std::string_view bytes);
  // The stream ended: a last line without its newline and an event without its blank line are delivered too
  // (servers that end with "data: [DONE]\n" and close). False as for feed().
  bool finish();

  const std::string& error() const { return error_; }

 private:
  bool line(std::string_view text);
  bool dispatch();

  EventHandler on_event_;
  std::size_t max_line_bytes_;
  std::string partial_;  // bytes of a line whose '\n' has not arrived
  std::string data_;     // data lines of the event in progress
  bool has_data_ = false;
  bool stopped_ = false;
  std::string error_;
};

}  // namespace mi::servebench
