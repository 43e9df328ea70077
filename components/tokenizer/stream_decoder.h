// Incremental detokenization for generation: feed ids one at a time and get back text that is always valid UTF-8
// and never ends in the middle of a character (bytes of an unfinished character are held until it completes).
// The concatenation of all feed() results and finish() equals Tokenizer::decode of the same ids (including the
// clean_up_tokenization_spaces cleanup, for which a little text may be held back until it is final).
#pragma once
#include <cstdint>
#include <string>

#include "tokenizer/tokenizer.h"

namespace mi::tok {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool skip_special = false);

  // Text completed by this token (possibly empty). mi::Error for an unknown id (the decoder state is unchanged).
  std::string feed(int32_t id);
  // Flushes held bytes: an unfinished character at the end becomes U+FFFD, as in a full decode.
  std::string finish();

 private:
  const Tokenizer& tokenizer_;
  bool skip_special_;
  bool first_token_ = true;
  std::string pending_;       // decoded bytes not yet returned (at most an unfinished character)
  std::string pending_text_;  // with space cleanup on: valid text held until cleanup cannot change it
};

}  // namespace mi::tok
