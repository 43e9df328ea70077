// Stop strings on streamed text: decides which generated text is final and may be printed.
//
// Text that could still turn out to be the beginning of a stop string is held back until the next pieces settle
// it, so a stop string is never printed, not even partly. When a stop string appears, the text ends right before
// its first occurrence (the stop string and everything after it are dropped) and further input is ignored.
// Stop strings must be non-empty valid UTF-8; since the input is whole characters (StreamDecoder output), holding
// back a suffix never splits a character.
#pragma once
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace mi::engine {

class StopTextFilter {
 public:
  explicit StopTextFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (const std::string& s : stops_)
      if (s.empty()) fail("stop strings must not be empty");
  }

  // Appends newly decoded text; returns the part of the text that is now final (possibly empty).
  std::string push(std::string_view piece) {
    if (stopped_) return {};
    text_ += piece;
    // An occurrence cannot start before released_: such a start was a prefix of a stop string when its text was
    // released, and prefixes of stop strings are held back.
    std::size_t first = std::string::npos;
    for (const std::string& s : stops_) first = std::min(first, text_.find(s, released_));
    if (first != std::string::npos) {
      text_.resize(first);
      stopped_ = true;
      return release(first);
    }
    return release(text_.size() - held_suffix());
  }

  // No more input: everything still held is final.
  std::string finish() { return release(text_.size()); }

  bool stopped() const { return stopped_; }
  // All text so far (final at finish()); without the stop string once stopped().
  const std::string& text() const { return text_; }

 private:
  // Length of the longest unreleased suffix of text_ that is a proper prefix of some stop string.
  std::size_t held_suffix() const {
    const std::size_t open = text_.size() - released_;
    std::size_t held = 0;
    for (const std::string& s : stops_) {
      for (std::size_t k = std::min(s.size() - 1, open); k > held; --k)
        if (std::string_view(text_).substr(text_.size() - k) == std::string_view(s).substr(0, k)) {
          held = k;
          break;
        }
    }
    return held;
  }

  std::string release(std::size_t end) {
    if (end <= released_) return {};
    std::string out = text_.substr(released_, end - released_);
    released_ = end;
    return out;
  }

  std::vector<std::string> stops_;
  std::string text_;
  std::size_t released_ = 0;
  bool stopped_ = false;
};

}  // namespace mi::engine
