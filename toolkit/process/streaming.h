// Running a child whose standard output is consumed as it arrives, with the time every piece of it arrived: what a
// client-side benchmark needs to time each streamed token. Same contract as process::run (argv without a shell, own
// process group, wall-clock timeout that kills the group, exit status, peak RSS from wait4); stdout is also
// collected into RunResult::out.
//
// The child's stdout is one end of a SOCK_SEQPACKET socket pair rather than a pipe: every write(2) of the child is
// one record, and the kernel stamps each record with the time it arrived in our receive queue (SO_TIMESTAMPNS,
// CLOCK_REALTIME). So a token's time is when the child wrote it, however late this process gets to run and read it
// on a busy machine, and records written close together are never merged into one read. The child's send buffer is
// raised (SO_SNDBUF, up to net.core.wmem_max) so that thousands of small records fit before a slow reader could
// block the writer. Its stderr is a pipe, as in process::run.
#pragma once
#include <functional>
#include <string_view>

#include "process/subprocess.h"

namespace mi::process {

// Called for every record (write) from the child's stdout: seconds from just before the fork to its arrival, and
// the bytes.
using OutputCallback = std::function<void(double t_s, std::string_view chunk)>;

RunResult run_streaming(const std::vector<std::string>& argv, const OutputCallback& on_stdout,
                        const RunOptions& options = {});

}  // namespace mi::process
