// bench/memory/engine_fill.cc: the memory fill test's load run on a FurrBall
// in this process, without the server, printing where a node's budget goes
// at every quarter batch: the pages in service and how many are free, open
// or staging, out of service (retired for the key table), and the bytes
// they hold live, dead or as padding. It answers "what does each part take"
// for a page-size rule (docs/memory_bench.md, "Smaller pages at middle
// budgets") with the engine's own counters rather than a guess.
//
//   bazel run -c opt //bench/memory:engine_fill -- --budget_mb=64
//       --value_bytes=1024 [--page_kb=N] [--batches=6] [--threads=2]
//
// Thread safety: a single-purpose program; its inserting threads share
// only the FurrBall (thread-safe) and an atomic key counter.
#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>

#include "bench/engine/ycsb_workload.h"
#include "bench/peers/peer_loop.h"
#include "engine/common/proc_status_testing.h"
#include "engine/furrball/furrball.h"

ABSL_FLAG(uint64_t, budget_mb, 64, "the cache's memory budget, MiB");
ABSL_FLAG(uint64_t, value_bytes, 1024, "bytes of every value");
ABSL_FLAG(uint64_t, key_bytes, 24, "bytes of every key (FormatKey)");
ABSL_FLAG(uint64_t, page_kb, 0, "page size in KiB; 0 = the plan's rule");
ABSL_FLAG(int, batches, 6,
          "budget-sized batches of distinct keys (budget / (key + value) "
          "keys each)");
ABSL_FLAG(int, threads, 2, "inserting threads");
ABSL_FLAG(uint64_t, read_back, 1000,
          "keys read back after the fill, the last ones inserted: a hit is "
          "a whole value that names its key");

namespace furrballs {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;

// CPU time of the calling thread, in nanoseconds.
double ThreadCpuNs() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e9 + static_cast<double>(t.tv_nsec);
}

// One line: the nodes' statistics summed, as pages and as bytes.
void PrintState(const FurrBall& ball, uint64_t inserted) {
  NodeStatsSnapshot sum;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    sum.live_keys += s.live_keys;
    sum.live_bytes += s.live_bytes;
    sum.dead_bytes += s.dead_bytes;
    sum.memory_limit_bytes += s.memory_limit_bytes;
    sum.pages_hot += s.pages_hot;
    sum.pages_cold += s.pages_cold;
    sum.pages_empty += s.pages_empty;
    sum.pages_freeze += s.pages_freeze;
    sum.pages_staging += s.pages_staging;
    sum.pages_retired += s.pages_retired;
    sum.key_table_capacity += s.key_table_capacity;
    sum.key_table_growths += s.key_table_growths;
    sum.padding_bytes += s.padding_bytes;
    sum.page_evictions += s.page_evictions;
    sum.pages_drained += s.pages_drained;
    sum.evictions_keys += s.evictions_keys;
    sum.evictions_capacity += s.evictions_capacity;
  }
  const MemoryPlan& plan = ball.memory_plan();
  const double budget = static_cast<double>(plan.node_budget_bytes) *
                        ball.node_count();
  const uint64_t in_service = sum.memory_limit_bytes / plan.page_size;
  std::printf(
      "inserted %9" PRIu64 "  keys %8" PRIu64 " (table %8" PRIu64
      ", %" PRIu64 " growths)  live %6.2f MiB = %5.1f%% of budget  dead "
      "%5.2f MiB  pages: in service %4" PRIu64 " free %3" PRIu64
      " hot %4" PRIu64 " cold %4" PRIu64 " staging %" PRIu64
      " freeze %" PRIu64 " retired %4" PRIu64
      "  keys evicted: by key count %" PRIu64 ", for room %" PRIu64
      "; pages evicted whole %" PRIu64 ", drained %" PRIu64
      "  RSS %6.1f MiB\n",
      inserted, sum.live_keys, sum.key_table_capacity, sum.key_table_growths,
      sum.live_bytes / kMiB, 100.0 * sum.live_bytes / budget,
      sum.dead_bytes / kMiB, in_service, sum.pages_empty, sum.pages_hot,
      sum.pages_cold, sum.pages_staging, sum.pages_freeze, sum.pages_retired,
      sum.evictions_keys, sum.evictions_capacity, sum.page_evictions,
      sum.pages_drained,
      VmRssBytes() / kMiB);
  std::fflush(stdout);
}

int Run() {
  FurrBallOptions options;
  options.memory_budget_bytes = absl::GetFlag(FLAGS_budget_mb) << 20;
  options.page_size_bytes = absl::GetFlag(FLAGS_page_kb) << 10;
  auto opened = FurrBall::Open(options);
  if (!opened.ok()) {
    std::fprintf(stderr, "engine_fill: %s\n",
                 std::string(opened.status().message()).c_str());
    return 2;
  }
  FurrBall& ball = **opened;
  std::printf("plan: %s\n", ball.memory_plan().Summary().c_str());
  const uint64_t key_bytes = absl::GetFlag(FLAGS_key_bytes);
  const uint64_t value_bytes = absl::GetFlag(FLAGS_value_bytes);
  const uint64_t per_batch =
      options.memory_budget_bytes / (key_bytes + value_bytes);
  const int threads = absl::GetFlag(FLAGS_threads);
  std::atomic<uint64_t> next{0};
  std::atomic<uint64_t> failed{0};
  for (int batch = 0; batch < absl::GetFlag(FLAGS_batches); ++batch) {
    for (int quarter = 1; quarter <= 4; ++quarter) {
      const uint64_t end = batch * per_batch + per_batch * quarter / 4;
      std::vector<std::thread> workers;
      for (int t = 0; t < threads; ++t) {
        workers.emplace_back([&] {
          std::string key;
          std::string value(value_bytes, 'v');
          for (uint64_t i; (i = next.fetch_add(1)) < end;) {
            bench::FormatKey(i, key_bytes, &key);
            bench::peers::StampValue(i, 0, &value);
            if (ball.Set(key, value).error != Error::kOk) failed.fetch_add(1);
          }
        });
      }
      for (std::thread& w : workers) w.join();
      next.store(end);
      PrintState(ball, end);
    }
  }
  std::printf("failed sets: %" PRIu64 "\n", failed.load());
  // The newest keys are the ones an LRU would keep; a chunked value is a
  // hit only if every chunk is still there.
  const uint64_t inserted = next.load();
  const uint64_t sample =
      std::min(absl::GetFlag(FLAGS_read_back), inserted);
  uint64_t hits = 0;
  uint64_t wrong = 0;
  std::string key;
  std::string expected(value_bytes, 'v');
  std::string value;
  const double start = ThreadCpuNs();
  for (uint64_t i = inserted - sample; i < inserted; ++i) {
    bench::FormatKey(i, key_bytes, &key);
    if (!ball.Get(key, &value).found) continue;
    bench::peers::StampValue(i, 0, &expected);
    ++(value == expected ? hits : wrong);
  }
  // The reading thread's CPU time for the reads and their checks: what a
  // chunked value costs a Get against a whole one, without the time the
  // thread spent preempted on a shared machine.
  const double ns = ThreadCpuNs() - start;
  std::printf("read back the last %" PRIu64 " keys inserted: %" PRIu64
              " hits, %" PRIu64 " wrong, %.0f ns of CPU per read\n",
              sample, hits, wrong, sample == 0 ? 0.0 : ns / sample);
  return wrong == 0 ? 0 : 1;
}

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return furrballs::Run();
}
