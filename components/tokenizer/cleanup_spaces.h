// "clean_up_tokenization_spaces" (tokenizer_config.json): the decode-time cleanup of transformers'
// PreTrainedTokenizerBase.clean_up_tokenization, which the reference decoders apply when the config asks for it
// (Llama 3 sets it to true). It removes the space before . ? ! , and English contractions, in this order:
//   " ." " ?" " !" " ,"  -> without the space;  " ' " -> "'";  " n't" " 'm" " 's" " 've" " 're" -> without the space
// Each rule is a left-to-right, non-overlapping replace over the whole string.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace mi::tok {

std::string clean_up_tokenization_spaces(std::string_view text);

// The largest split point p (0 < p < text.size(), 0 if none) such that for every continuation `more`,
//   clean_up(text + more) == clean_up(text[0, p)) + clean_up(text[p, ...) + more).
// That holds where text[p-1] and text[p] are both non-space characters that are never adjacent inside a rule's
// pattern: only spaces are ever deleted, so no rule can match across them at any step. Never splits inside a
// UTF-8 character.
size_t last_cleanup_safe_split(std::string_view text);

}  // namespace mi::tok
