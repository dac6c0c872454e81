// clients/cli/load.cc: see load.h.
#include "clients/cli/load.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <thread>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/synchronization/mutex.h>
#include <absl/time/time.h>

namespace furrballs::cli {
namespace {

using Clock = std::chrono::steady_clock;

// One worker's tallies. Only `done` and `errors` are read while the worker
// runs (by the progress reporter), so only they are atomic; relaxed because
// progress lines need no ordering. alignas keeps workers off each other's
// cache lines.
struct alignas(64) WorkerState {
  std::atomic<uint64_t> done{0};
  std::atomic<uint64_t> errors{0};
  uint64_t gets = 0;
  uint64_t sets = 0;
  uint64_t hits = 0;
  uint64_t misses = 0;
  std::map<absl::StatusCode, uint64_t> errors_by_code;
  std::string first_error;
  std::vector<uint64_t> latencies_ns;
};

void Work(client::ClusterClient& cluster, const LoadOptions& o,
          std::atomic<uint64_t>& next, const std::string& value, int index,
          WorkerState& w) {
  std::mt19937_64 rng(o.seed * 1000003 + static_cast<uint64_t>(index));
  std::uniform_int_distribution<uint64_t> pick_key(0, o.keys - 1);
  std::uniform_real_distribution<double> pick_op(0.0, 1.0);
  std::string key;
  // Each claimed index is one operation, so the loop ends after `ops` in all.
  while (next.fetch_add(1, std::memory_order_relaxed) < o.ops) {
    key = absl::StrCat(o.key_prefix, pick_key(rng));
    const bool is_get = pick_op(rng) < o.get_ratio;
    const Clock::time_point start = Clock::now();
    absl::Status status;
    if (is_get) {
      ++w.gets;
      absl::StatusOr<std::optional<client::Entry>> r = cluster.Get(key, o.call);
      status = r.status();
      if (r.ok()) ++(r->has_value() ? w.hits : w.misses);
    } else {
      ++w.sets;
      status = cluster.Set(key, value, {}, o.call).status();
    }
    w.latencies_ns.push_back(static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() -
                                                             start)
            .count()));
    if (!status.ok()) {
      w.errors.fetch_add(1, std::memory_order_relaxed);
      ++w.errors_by_code[status.code()];
      if (w.first_error.empty()) w.first_error = status.ToString();
    }
    w.done.fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

uint64_t Percentile(const std::vector<uint64_t>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double rank = std::ceil(p * static_cast<double>(sorted.size()));
  const size_t index =
      static_cast<size_t>(std::clamp(rank, 1.0, double(sorted.size()))) - 1;
  return sorted[index];
}

LoadReport RunLoad(client::ClusterClient& cluster, const LoadOptions& o,
                   const std::function<void(const LoadProgress&)>& progress,
                   std::chrono::milliseconds progress_period) {
  const int n = std::max(1, o.concurrency);
  std::vector<std::unique_ptr<WorkerState>> workers;
  for (int i = 0; i < n; ++i) {
    workers.push_back(std::make_unique<WorkerState>());
    workers.back()->latencies_ns.reserve(o.ops / n + 1);
  }
  const std::string value(o.value_size, 'v');
  std::atomic<uint64_t> next{0};
  absl::Mutex mu;
  int running = n;

  const Clock::time_point start = Clock::now();
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      Work(cluster, o, next, value, i, *workers[i]);
      absl::MutexLock lock(&mu);
      --running;
    });
  }
  // Reports once per period until every worker has finished; each wait ends
  // early when the last worker does, so the run is not padded to a period.
  while (true) {
    bool finished;
    {
      absl::MutexLock lock(&mu);
      finished = mu.AwaitWithTimeout(
          absl::Condition(+[](int* r) { return *r == 0; }, &running),
          absl::FromChrono(progress_period));
    }
    if (finished) break;
    if (!progress) continue;
    LoadProgress p;
    for (const auto& w : workers) {
      p.done += w->done.load(std::memory_order_relaxed);
      p.errors += w->errors.load(std::memory_order_relaxed);
    }
    p.elapsed_s = std::chrono::duration<double>(Clock::now() - start).count();
    progress(p);
  }
  for (std::thread& t : threads) t.join();

  LoadReport r;
  r.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  std::vector<uint64_t> all;
  all.reserve(o.ops);
  for (const auto& w : workers) {
    r.ops += w->done.load(std::memory_order_relaxed);
    r.errors += w->errors.load(std::memory_order_relaxed);
    r.gets += w->gets;
    r.sets += w->sets;
    r.hits += w->hits;
    r.misses += w->misses;
    for (const auto& [code, count] : w->errors_by_code) {
      r.errors_by_code[code] += count;
    }
    if (r.first_error.empty()) r.first_error = w->first_error;
    all.insert(all.end(), w->latencies_ns.begin(), w->latencies_ns.end());
  }
  std::sort(all.begin(), all.end());
  r.p50_us = Percentile(all, 0.50) / 1e3;
  r.p99_us = Percentile(all, 0.99) / 1e3;
  r.p999_us = Percentile(all, 0.999) / 1e3;
  r.max_us = all.empty() ? 0 : all.back() / 1e3;
  return r;
}

std::string FormatReport(const LoadReport& r) {
  std::string out = absl::StrFormat(
      "ops        %d in %.2f s = %.0f ops/s\n"
      "gets       %d (hits %d, misses %d)\n"
      "sets       %d\n"
      "latency    p50 %.1f us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n"
      "errors     %d\n",
      r.ops, r.seconds, r.ops_per_second(), r.gets, r.hits, r.misses, r.sets,
      r.p50_us, r.p99_us, r.p999_us, r.max_us, r.errors);
  for (const auto& [code, count] : r.errors_by_code) {
    absl::StrAppend(&out, "  ", absl::StatusCodeToString(code), ": ", count,
                    "\n");
  }
  if (!r.first_error.empty()) {
    absl::StrAppend(&out, "first error: ", r.first_error, "\n");
  }
  return out;
}

}  // namespace furrballs::cli
