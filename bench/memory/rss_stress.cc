// rss_stress: drives a Furrballs server harder than the memory fill test does
// and reports the largest RSS it reached (issue 13 goal 1: RSS within
// 1.05 x budget + 24 MiB at every moment). The fill sends 4 MultiSets at a
// time; this sends --connections x --in_flight of them at once, each as
// large as the server's default message limit allows, in bursts with pauses
// between (freed request buffers are then taken again by the next burst),
// over a key space twice the budget so that the engine evicts throughout.
//
//   rss_stress --address=127.0.0.1:50051 --pid=4242 --budget_mb=64
//       --value_bytes=1048576 --connections=8 --in_flight=2 --seconds=10
//
// The server's VmRSS is sampled every --sample_ms on a thread of its own
// (the fill samples it only between its quarter batches). With --dump_dir,
// every time the sampled RSS reaches a new maximum past the bound less
// --dump_margin_mb, the server's /proc/PID/smaps
// is copied to DIR/smaps-peak.txt (what holds the RSS: the engine's mappings,
// glibc's heaps and mmapped chunks) and the server is sent SIGUSR1, on which
// furrballs_server prints glibc's malloc_info (every arena) to its stderr.
// Results: one JSON object to --out (default stdout); progress to stderr.
// bench/memory/stress.py starts the servers and runs this
// (docs/memory_bench.md, "Requests in flight are bounded").
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/synchronization/blocking_counter.h>
#include <absl/synchronization/mutex.h>

#include "bench/engine/ycsb_runner.h"
#include "bench/engine/ycsb_workload.h"
#include "bench/peers/peer_loop.h"
#include "clients/cpp/client.h"

ABSL_FLAG(std::string, address, "127.0.0.1:50051", "The server's host:port.");
ABSL_FLAG(int, pid, 0, "The server's pid, whose RSS is sampled.");
ABSL_FLAG(uint64_t, budget_mb, 64, "The server's --memory_mb.");
ABSL_FLAG(uint64_t, value_bytes, 1 << 20, "Value length (at least 8).");
ABSL_FLAG(int, connections, 8, "Client connections (channels), one thread each.");
ABSL_FLAG(int, in_flight, 2, "MultiSets each connection keeps in flight at once.");
ABSL_FLAG(uint64_t, items, 0,
          "Items per MultiSet; 0: as many as fit in 15 MiB (the server's default "
          "message limit is 16 MiB), at most 256.");
ABSL_FLAG(double, seconds, 10, "How long to drive the server.");
ABSL_FLAG(int, burst_ms, 300, "Length of a burst of requests.");
ABSL_FLAG(int, pause_ms, 100, "Pause between bursts (every connection waits).");
ABSL_FLAG(int, sample_ms, 2, "How often the server's VmRSS is read.");
ABSL_FLAG(std::string, dump_dir, "",
          "Where to copy the server's smaps at each new RSS maximum near the bound, "
          "and send it SIGUSR1 (malloc_info to its stderr). Empty: no dumps.");
ABSL_FLAG(double, dump_margin_mb, 4, "Dump from this far below the bound on.");
ABSL_FLAG(std::string, out, "", "Write the JSON result here (default: stdout).");

namespace furrballs::bench::memory {
namespace {

constexpr uint64_t kMessageBytes = uint64_t{15} << 20;

void CopyFile(const std::string& from, const std::string& to) {
  std::ifstream in(from);
  std::ofstream out(to, std::ios::trunc);
  out << in.rdbuf();
}

// What the sampler saw.
struct RssTrace {
  int64_t max_bytes = 0;
  double max_at_seconds = 0;
  int dumps = 0;
};

struct Calls {
  absl::Mutex mu;
  uint64_t ok_items = 0;
  std::map<std::string, uint64_t> failed;  // by status code name, items
};

int Run() {
  const std::string address = absl::GetFlag(FLAGS_address);
  const int pid = absl::GetFlag(FLAGS_pid);
  const uint64_t budget = absl::GetFlag(FLAGS_budget_mb) << 20;
  const uint64_t value_bytes = absl::GetFlag(FLAGS_value_bytes);
  const int connections = absl::GetFlag(FLAGS_connections);
  const int in_flight = absl::GetFlag(FLAGS_in_flight);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int burst_ms = absl::GetFlag(FLAGS_burst_ms);
  const int pause_ms = absl::GetFlag(FLAGS_pause_ms);
  const std::string dump_dir = absl::GetFlag(FLAGS_dump_dir);
  constexpr size_t kKeyBytes = 24;
  uint64_t items = absl::GetFlag(FLAGS_items);
  if (items == 0) {
    items = std::clamp<uint64_t>(kMessageBytes / (value_bytes + kKeyBytes + 16), 1, 256);
  }
  if (pid <= 0 || budget == 0 || value_bytes < 8 || connections < 1 || in_flight < 1 ||
      burst_ms < 1 || pause_ms < 0 || absl::GetFlag(FLAGS_sample_ms) < 1) {
    absl::FPrintF(stderr,
                 "rss_stress: need --pid, --budget_mb >= 1, --value_bytes >= 8, "
                 "--connections, --in_flight, --burst_ms, --sample_ms >= 1\n");
    return 2;
  }
  // Twice what the budget holds, so the engine evicts from the first pass.
  const uint64_t key_space = std::max<uint64_t>(2 * budget / (value_bytes + kKeyBytes),
                                                items * connections * in_flight);
  const double bound = 1.05 * static_cast<double>(budget) + (24 << 20);

  std::atomic<bool> stop{false};
  RssTrace trace;
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::thread sampler([&] {
    const auto period = std::chrono::milliseconds(absl::GetFlag(FLAGS_sample_ms));
    const double dump_from = bound - absl::GetFlag(FLAGS_dump_margin_mb) * 1048576.0;
    while (!stop.load(std::memory_order_relaxed)) {
      const int64_t rss = ReadRssBytes(pid);
      if (rss > trace.max_bytes) {
        trace.max_bytes = rss;
        trace.max_at_seconds = since_start();
        if (!dump_dir.empty() && static_cast<double>(rss) >= dump_from) {
          CopyFile(absl::StrCat("/proc/", pid, "/smaps"),
                   absl::StrCat(dump_dir, "/smaps-peak.txt"));
          kill(pid, SIGUSR1);
          ++trace.dumps;
        }
      }
      std::this_thread::sleep_for(period);
    }
  });

  Calls calls;
  std::vector<std::thread> threads;
  for (int c = 0; c < connections; ++c) {
    threads.emplace_back([&, c] {
      client::ClientOptions options;
      options.default_timeout = std::chrono::milliseconds(30000);
      options.batch_streams = 0;
      client::Client client(address, options);
      std::vector<std::vector<client::SetItem>> requests(in_flight);
      uint64_t next = key_space * c / connections;
      while (since_start() < seconds) {
        // Bursts on a common clock: every connection pauses at once, so that
        // the server frees what a burst held before the next one takes it.
        const int64_t ms = static_cast<int64_t>(since_start() * 1000);
        const int64_t in_cycle = ms % (burst_ms + pause_ms);
        if (in_cycle >= burst_ms) {
          std::this_thread::sleep_for(
              std::chrono::milliseconds(burst_ms + pause_ms - in_cycle));
          continue;
        }
        absl::BlockingCounter pending(in_flight);
        for (auto& request : requests) {
          request.resize(items);
          for (client::SetItem& item : request) {
            const uint64_t k = next++ % key_space;
            FormatKey(k, kKeyBytes, &item.key);
            item.value.assign(value_bytes, 'v');
            peers::StampValue(k, 0, &item.value);
          }
          client.MultiSetAsync(request, [&](auto result) {
            absl::MutexLock lock(&calls.mu);
            if (!result.ok()) {
              calls.failed[absl::StatusCodeToString(result.status().code())] += items;
            } else {
              for (const auto& r : *result) {
                if (r.ok()) {
                  ++calls.ok_items;
                } else {
                  ++calls.failed[absl::StatusCodeToString(r.status().code())];
                }
              }
            }
            pending.DecrementCount();
          });
        }
        pending.Wait();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // The last answers leave the server after its buffers were freed; one
  // more period of samples sees what stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  stop = true;
  sampler.join();
  const int64_t rss_end = ReadRssBytes(pid);

  std::vector<std::string> failed;
  for (const auto& [code, n] : calls.failed) {
    failed.push_back(absl::StrFormat("\"%s\":%d", code, n));
  }
  const double max_ratio = static_cast<double>(trace.max_bytes) / budget;
  absl::FPrintF(stderr,
               "[rss_stress] %d connections x %d MultiSets of %d x %d B: max RSS %.1f MiB "
               "(%.3fx budget, at %.1f s), end %.1f MiB, bound %.1f MiB: "
               "%s; %d items stored, failed {%s}\n",
               connections, in_flight, items, value_bytes, trace.max_bytes / 1048576.0,
               max_ratio, trace.max_at_seconds, rss_end / 1048576.0,
               bound / 1048576.0, trace.max_bytes <= bound ? "within" : "OVER",
               calls.ok_items, absl::StrJoin(failed, ","));
  const std::string json = absl::StrFormat(
      "{\"budget_bytes\":%d,\"value_bytes\":%d,\"connections\":%d,\"in_flight\":%d,"
      "\"items\":%d,\"seconds\":%.1f,\"burst_ms\":%d,\"pause_ms\":%d,"
      "\"max_rss_bytes\":%d,\"max_rss_ratio\":%.4f,\"max_at_seconds\":%.2f,"
      "\"rss_end_bytes\":%d,\"bound_bytes\":%.0f,\"within_bound\":%s,"
      "\"ok_items\":%d,\"failed_items\":{%s},\"dumps\":%d}\n",
      budget, value_bytes, connections, in_flight, items, seconds, burst_ms, pause_ms,
      trace.max_bytes, max_ratio, trace.max_at_seconds, rss_end, bound,
      trace.max_bytes <= bound ? "true" : "false", calls.ok_items,
      absl::StrJoin(failed, ","), trace.dumps);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) {
    std::fputs(json.c_str(), stdout);
  } else {
    std::ofstream(out, std::ios::trunc) << json;
  }
  return 0;
}

}  // namespace
}  // namespace furrballs::bench::memory

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return furrballs::bench::memory::Run();
}
