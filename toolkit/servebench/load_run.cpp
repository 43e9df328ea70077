#include "servebench/load_run.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <thread>

#include "servebench/server_counters.h"
#include "servebench/sse_client.h"

namespace mi::servebench {

LevelRun run_level(const Workload& w, int concurrency, int requests, Clock::time_point deadline, std::ostream* progress) {
  LevelRun run;
  run.concurrency = concurrency;
  run.requests_planned = requests;
  const std::string path = endpoint_path(w.endpoint);
  const std::string body = request_body(w).dump();
  std::vector<std::optional<RequestResult>> slots(std::size_t(std::max(requests, 0)));
  std::atomic<int> next{0};
  std::atomic<int> finished{0}, failed{0};
  std::atomic<bool> deadline_hit{false};
  std::mutex progress_mutex;

  auto worker = [&] {
    SseClient client(w.url);
    for (;;) {
      if (Clock::now() >= deadline) {
        deadline_hit = true;
        return;
      }
      const int i = next.fetch_add(1);
      if (i >= requests) return;
      RequestResult r = client.post_stream(path, body, w.timeout_s, deadline);
      if (!r.ok) ++failed;
      const int done = ++finished;
      slots[std::size_t(i)] = std::move(r);
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        *progress << "serve-bench: concurrency " << concurrency << ": " << done << "/" << requests << " done (" << failed.load()
                  << " failed)\n";
      }
    }
  };

  const std::optional<ServerCounters> before = scrape_counters(w.url, std::min(w.timeout_s, 10.0));
  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(std::size_t(concurrency));
  for (int t = 0; t < concurrency; ++t) threads.emplace_back(worker);
  for (std::thread& t : threads) t.join();
  run.duration_s = std::chrono::duration<double>(Clock::now() - start).count();
  run.server = server_work(before, scrape_counters(w.url, std::min(w.timeout_s, 10.0)));

  for (auto& s : slots)
    if (s) run.results.push_back(std::move(*s));
  run.requests_sent = int(run.results.size());
  run.deadline_reached = deadline_hit.load() || run.requests_sent < requests;
  return run;
}

}  // namespace mi::servebench
