#include "tokenizer/stream_decoder.h"

#include "common/error.h"
#include "tokenizer/cleanup_spaces.h"
#include "tokenizer/utf8.h"

namespace mi::tok {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::feed(int32_t id) {
  if (!tokenizer_.is_valid_id(id)) {
    fail("detokenize: token id ", id, " is not in the vocabulary (valid ids: 0..", tokenizer_.vocab_size() - 1, ")");
  }
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  if (!first_token_) pending_.append(tokenizer_.token_separator());
  first_token_ = false;
  tokenizer_.append_token_bytes(id, &pending_);
  // Everything up to an unfinished trailing character is final: no later byte can change how it decodes.
  const size_t hold = incomplete_utf8_suffix_length(pending_);
  std::string text = utf8_lossy(std::string_view(pending_).substr(0, pending_.size() - hold));
  pending_.erase(0, pending_.size() - hold);
  if (!tokenizer_.cleans_up_tokenization_spaces()) return text;
  // The space cleanup looks ahead a few characters: release text only up to a point no later text can affect.
  pending_text_ += text;
  const size_t split = last_cleanup_safe_split(pending_text_);
  std::string ready = clean_up_tokenization_spaces(std::string_view(pending_text_).substr(0, split));
  pending_text_.erase(0, split);
  return ready;
}

std::string StreamDecoder::finish() {
  std::string text = utf8_lossy(pending_);
  pending_.clear();
  if (tokenizer_.cleans_up_tokenization_spaces()) {
    text = clean_up_tokenization_spaces(pending_text_ + text);
    pending_text_.clear();
  }
  return text;
}

}  // namespace mi::tok
