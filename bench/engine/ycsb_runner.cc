// bench/engine/ycsb_runner.cc: load, run and measure one cell.
#include "bench/engine/ycsb_runner.h"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_split.h>

#include "bench/engine/cycle_timer.h"
#include "bench/engine/latency_histogram.h"

namespace furrballs::bench {
namespace {

uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// Calls f(name, field) for every field of a CellResult, in one fixed order
// shared by Serialize and Parse.
template <typename Result, typename F>
void ForEachField(Result& r, F&& f) {
  f("records", r.records);
  f("ops", r.ops);
  f("load_seconds", r.load_seconds);
  f("run_seconds", r.run_seconds);
  f("ops_per_second", r.ops_per_second);
  f("get_p50_ns", r.get_p50_ns);
  f("get_p99_ns", r.get_p99_ns);
  f("set_p50_ns", r.set_p50_ns);
  f("set_p99_ns", r.set_p99_ns);
  f("reads", r.reads);
  f("read_hits", r.read_hits);
  f("sets", r.sets);
  f("refused_sets", r.refused_sets);
  f("bad_values", r.bad_values);
  f("live_value_bytes", r.live_value_bytes);
  f("rss_growth_bytes", r.rss_growth_bytes);
  f("run_cpu_share", r.run_cpu_share);
}

// Per-thread measurements, each on its own cache lines so that the threads
// never write to a shared line while timing.
struct alignas(64) ThreadStats {
  LatencyHistogram get_latency;
  LatencyHistogram set_latency;
  uint64_t reads = 0;
  uint64_t read_hits = 0;
  uint64_t sets = 0;
  uint64_t refused_sets = 0;
  uint64_t bad_values = 0;
  uint64_t end_ns = 0;
  uint64_t cpu_ns = 0;
};

// A record's value: its key number in bytes [0, 8), a version stamp in
// [8, 16) when there is room, filler after that.
void StampValue(uint64_t key_number, uint64_t version, std::string* value) {
  const size_t n = value->size();
  std::memcpy(value->data(), &key_number, std::min<size_t>(8, n));
  if (n >= 16) std::memcpy(value->data() + 8, &version, 8);
}

bool ValueMatches(const std::string& value, uint64_t key_number,
                  size_t value_bytes) {
  if (value.size() != value_bytes) return false;
  uint64_t stored = 0;
  std::memcpy(&stored, value.data(), std::min<size_t>(8, value_bytes));
  const uint64_t mask =
      value_bytes >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * value_bytes)) - 1;
  return stored == (key_number & mask);
}

template <typename Body>
void RunOnThreads(int threads, Body body) {
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
  for (auto& thread : pool) thread.join();
}

}  // namespace

uint64_t CellSpec::RecordCount() const {
  const double records = working_set_factor *
                         static_cast<double>(memory_budget_bytes) /
                         static_cast<double>(key_bytes + value_bytes);
  return std::max<uint64_t>(2, static_cast<uint64_t>(records));
}

std::string CellResult::Serialize() const {
  std::string line;
  ForEachField(*this, [&line](const char* name, const auto& value) {
    absl::StrAppend(&line, line.empty() ? "" : " ", name, "=");
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, double>) {
      absl::StrAppend(&line, absl::StrFormat("%.17g", value));  // StrCat rounds to 6 digits
    } else {
      absl::StrAppend(&line, value);
    }
  });
  return line;
}

absl::StatusOr<CellResult> CellResult::Parse(std::string_view line) {
  CellResult result;
  std::vector<std::pair<std::string, std::string>> pairs;
  // This absl is built with its own string_view, distinct from std's.
  const absl::string_view text(line.data(), line.size());
  for (absl::string_view token :
       absl::StrSplit(text, ' ', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(token, '=');
    pairs.push_back(std::move(kv));
  }
  absl::Status status;
  ForEachField(result, [&](const char* name, auto& value) {
    const auto it = std::find_if(pairs.begin(), pairs.end(),
                                 [name](const auto& kv) { return kv.first == name; });
    bool ok = it != pairs.end();
    if (ok) {
      if constexpr (std::is_same_v<std::decay_t<decltype(value)>, double>) {
        ok = absl::SimpleAtod(it->second, &value);
      } else {
        ok = absl::SimpleAtoi(it->second, &value);
      }
    }
    if (!ok && status.ok()) {
      status = absl::InvalidArgumentError(
          absl::StrCat("result line lacks a valid '", name, "': ", text));
    }
  });
  if (!status.ok()) return status;
  return result;
}

int64_t ReadRssBytes(int pid) {
  std::ifstream status(pid == 0 ? std::string("/proc/self/status")
                                : absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) != 0) continue;
    int64_t kib = 0;
    for (char c : line) {
      if (c >= '0' && c <= '9') kib = kib * 10 + (c - '0');
    }
    return kib * 1024;
  }
  return -1;
}

double ReadCpuSeconds(int pid) {
  std::ifstream stat(absl::StrCat("/proc/", pid, "/stat"));
  std::string text((std::istreambuf_iterator<char>(stat)),
                   std::istreambuf_iterator<char>());
  // The command name (field 2) may hold spaces; the fields after its ')'
  // start with the state (field 3), so utime and stime (14, 15) are the
  // 12th and 13th.
  const size_t paren = text.rfind(')');
  if (paren == std::string::npos) return -1;
  const std::vector<std::string> fields = absl::StrSplit(
      text.substr(paren + 1), ' ', absl::SkipEmpty());
  uint64_t utime = 0;
  uint64_t stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return -1;
  }
  return static_cast<double>(utime + stime) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

double ProcessCpuSeconds() {
  timespec t;
  if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t) != 0) return -1;
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

absl::StatusOr<CellResult> RunCell(const CellSpec& spec, BackendFactory factory) {
  const uint64_t records = spec.RecordCount();
  const int threads = spec.threads;
  const size_t value_bytes = spec.value_bytes;
  const size_t key_bytes = spec.key_bytes;
  const KeyChooser chooser(spec.distribution, records, spec.zipf_theta);
  std::vector<ThreadStats> stats(threads);
  const double ns_per_tick =
      1.0 / (spec.ticks_per_ns > 0 ? spec.ticks_per_ns
                                   : CycleTimer::TicksPerNs(std::chrono::milliseconds(50)));

  BackendConfig config;
  config.memory_budget_bytes = spec.memory_budget_bytes;
  config.key_bytes = key_bytes;
  config.value_bytes = value_bytes;
  config.record_count = records;
  config.threads = threads;
  config.furrball_keys_per_node = spec.furrball_keys_per_node;

  // The operation plan: each thread's keys and read/write choices, drawn
  // before the backend exists so that neither the generators' cost nor the
  // plan's memory lands in the measurements.
  constexpr uint64_t kReadBit = uint64_t{1} << 63;
  std::vector<std::vector<uint64_t>> plans(threads);
  for (int t = 0; t < threads; ++t) {
    Rng rng(spec.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(t) + 1);
    plans[t].resize(spec.ops_per_thread);
    for (uint64_t& op : plans[t]) {
      op = chooser.Next(rng);
      if (rng.NextDouble() < spec.workload.read_proportion) op |= kReadBit;
    }
  }

  const int64_t rss_before = ReadRssBytes();
  absl::StatusOr<std::unique_ptr<CacheBackend>> made = factory(config);
  if (!made.ok()) return made.status();
  CacheBackend& backend = **made;

  // Load: disjoint key ranges, each in key order.
  const uint64_t load_start = NowNs();
  RunOnThreads(threads, [&](int t) {
    std::string key;
    std::string value(value_bytes, 'v');
    const uint64_t first = records * t / threads;
    const uint64_t last = records * (t + 1) / threads;
    for (uint64_t k = first; k < last; ++k) {
      FormatKey(k, key_bytes, &key);
      StampValue(k, 0, &value);
      if (!backend.Set(key, value)) ++stats[t].refused_sets;
    }
  });
  const uint64_t load_end = NowNs();

  // Run: all threads wait for one start signal so that the wall time covers
  // them running together.
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  auto run_body = [&](int t) {
    ThreadStats& s = stats[t];
    const std::vector<uint64_t>& plan = plans[t];
    std::string key;
    std::string value(value_bytes, 'v');
    std::string read_buffer;
    read_buffer.reserve(value_bytes);
    const uint64_t version_base = (static_cast<uint64_t>(t) + 1) << 48;
    const WorkloadMix mix = spec.workload;
    auto ToNs = [ns_per_tick](uint64_t ticks) {
      return static_cast<uint64_t>(static_cast<double>(ticks) * ns_per_tick + 0.5);
    };

    // A timed write of `v` to `key`.
    auto timed_set = [&](std::string_view v) {
      const uint64_t t0 = CycleTimer::Now();
      const bool ok = backend.Set(key, v);
      const uint64_t t1 = CycleTimer::Now();
      s.set_latency.Record(ToNs(t1 - t0));
      ++s.sets;
      if (!ok) ++s.refused_sets;
    };
    // A timed read of `key`, with hit accounting and value checking.
    auto timed_get = [&](uint64_t k) {
      const uint64_t t0 = CycleTimer::Now();
      const bool hit = backend.Get(key, &read_buffer);
      const uint64_t t1 = CycleTimer::Now();
      s.get_latency.Record(ToNs(t1 - t0));
      ++s.reads;
      if (hit) {
        ++s.read_hits;
        if (!ValueMatches(read_buffer, k, value_bytes)) ++s.bad_values;
      }
      return hit;
    };

    ready.fetch_add(1, std::memory_order_release);
    while (!go.load(std::memory_order_acquire)) {
    }
    const uint64_t cpu_start = ThreadCpuNs();
    for (uint64_t i = 0; i < plan.size(); ++i) {
      const uint64_t k = plan[i] & ~kReadBit;
      const bool is_read = (plan[i] & kReadBit) != 0;
      FormatKey(k, key_bytes, &key);
      if (is_read || mix.read_modify_write) {
        const bool hit = timed_get(k);
        if (is_read) {
          if (!hit) {
            StampValue(k, version_base | i, &value);
            timed_set(value);  // read-through fill
          }
          continue;
        }
        // Read-modify-write: write back the value just read, re-stamped.
        if (hit && read_buffer.size() == value_bytes) {
          StampValue(k, version_base | i, &read_buffer);
          timed_set(read_buffer);
        } else {
          StampValue(k, version_base | i, &value);
          timed_set(value);
        }
        continue;
      }
      StampValue(k, version_base | i, &value);
      timed_set(value);
    }
    s.end_ns = NowNs();
    s.cpu_ns = ThreadCpuNs() - cpu_start;
  };
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) pool.emplace_back(run_body, t);
  while (ready.load(std::memory_order_acquire) < threads) std::this_thread::yield();
  const uint64_t run_start = NowNs();
  go.store(true, std::memory_order_release);
  for (auto& thread : pool) thread.join();

  CellResult result;
  result.records = records;
  result.ops = spec.ops_per_thread * static_cast<uint64_t>(threads);
  result.load_seconds = static_cast<double>(load_end - load_start) * 1e-9;
  uint64_t run_end = 0;
  uint64_t cpu_ns = 0;
  LatencyHistogram get_latency;
  LatencyHistogram set_latency;
  for (const ThreadStats& s : stats) {
    run_end = std::max(run_end, s.end_ns);
    cpu_ns += s.cpu_ns;
    get_latency.Merge(s.get_latency);
    set_latency.Merge(s.set_latency);
    result.reads += s.reads;
    result.read_hits += s.read_hits;
    result.sets += s.sets;
    result.refused_sets += s.refused_sets;
    result.bad_values += s.bad_values;
  }
  result.run_seconds = static_cast<double>(run_end - run_start) * 1e-9;
  result.ops_per_second =
      result.run_seconds > 0 ? static_cast<double>(result.ops) / result.run_seconds : 0;
  if (result.run_seconds > 0) {
    result.run_cpu_share = static_cast<double>(cpu_ns) * 1e-9 /
                           (result.run_seconds * threads);
  }
  result.get_p50_ns = get_latency.Percentile(0.50);
  result.get_p99_ns = get_latency.Percentile(0.99);
  result.set_p50_ns = set_latency.Percentile(0.50);
  result.set_p99_ns = set_latency.Percentile(0.99);
  const int64_t rss_after = ReadRssBytes();
  result.rss_growth_bytes = rss_after - rss_before;
  result.live_value_bytes = backend.LiveValueBytes();
  result.note = backend.Describe();
  return result;
}

}  // namespace furrballs::bench
