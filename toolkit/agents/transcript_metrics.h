// A conversation's Table 1 figures counted back from its transcript, for conversations that never reached
// metrics.json: the process was killed (a wall-clock limit, a signal, an out-of-memory kill) or an exception left
// the conversation loop. metrics.json is rewritten only after a conversation ends, but the transcript is flushed
// event by event (transcript.h), so it is the durable record: every request, usage report, tool call and result is
// in it up to the moment the process died. Counting from it keeps "agents started", messages, tool calls, edits and
// tokens honest for runs that were cut short, instead of silently dropping their most expensive conversation.
//
// The figures are the ones run_conversation counts, recomputed from events: turns (requests sent: assistant and
// error events), messages (the task, each assistant turn, each tool result), tool calls by kind (each result, plus
// the call that was executing when the process died), edits and lines changed and violations (from the tool-result
// events), tokens and HTTP attempts (from usage), wall time (the last event's time). A transcript without an "end"
// event gets stop = "killed".
#pragma once
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "agents/run_metrics.h"

namespace mi::agents {

// The stop reason given to a conversation whose transcript has no end event.
inline constexpr const char* kKilledStop = "killed";

// Counts the transcript `run_dir/transcript` (relative). A last line cut in the middle (the process died while
// writing it) is ignored; any other line that is not JSON is an mi::Error naming the file and line.
ConversationMetrics metrics_from_transcript(const std::filesystem::path& run_dir, const std::string& transcript);

// The conversations whose transcripts lie in run_dir/transcripts/ but are not among `recorded` (by transcript
// path), counted from their transcripts, in file-name order.
std::vector<ConversationMetrics> unrecorded_conversations(const std::filesystem::path& run_dir,
                                                          const std::vector<ConversationMetrics>& recorded);

}  // namespace mi::agents
