// bench/peers/peer_loop.cc: load, closed loop and open loop.
#include "bench/peers/peer_loop.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include <absl/status/status.h>

namespace furrballs::bench::peers {
namespace {

// What one thread measured; merged after the join.
struct ThreadResult {
  PeerCellResult cell;
  uint64_t last_done_ns = 0;
  absl::Status status;
};

// Runs body(t) on `threads` threads and joins them.
template <typename Body>
void RunOnThreads(int threads, Body body) {
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (int t = 0; t < threads; ++t) pool.emplace_back(body, t);
  for (std::thread& thread : pool) thread.join();
}

// Waits until steady-clock time `when_ns`: sleeps while far away, then spins
// (a sleep overshoots by tens of microseconds).
void WaitUntil(uint64_t when_ns) {
  constexpr uint64_t kSpinNs = 200000;
  for (;;) {
    const uint64_t now = NowNs();
    if (now >= when_ns) return;
    if (when_ns - now > kSpinNs) {
      std::this_thread::sleep_for(std::chrono::nanoseconds(when_ns - now - kSpinNs));
    }
  }
}

enum class Kind : uint8_t { kRead, kUpdate, kReadModifyWrite };

}  // namespace

void StampValue(uint64_t key_number, uint64_t version, std::string* value) {
  const size_t n = value->size();
  std::memcpy(value->data(), &key_number, std::min<size_t>(8, n));
  if (n >= 16) std::memcpy(value->data() + 8, &version, 8);
}

bool ValueMatches(const std::string& value, uint64_t key_number, size_t value_bytes) {
  if (value.size() != value_bytes) return false;
  uint64_t stored = 0;
  std::memcpy(&stored, value.data(), std::min<size_t>(8, value_bytes));
  const uint64_t mask =
      value_bytes >= 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * value_bytes)) - 1;
  return stored == (key_number & mask);
}

absl::StatusOr<uint64_t> LoadRecords(const ClientFactory& factory, uint64_t first_record,
                                     uint64_t records, size_t key_bytes,
                                     size_t value_bytes, int threads, int depth) {
  std::vector<ThreadResult> results(threads);
  RunOnThreads(threads, [&](int t) {
    ThreadResult& r = results[t];
    absl::StatusOr<std::unique_ptr<PeerClient>> client = factory();
    if (!client.ok()) {
      r.status = client.status();
      return;
    }
    std::vector<PeerOp> batch;
    const uint64_t first = first_record + records * t / threads;
    const uint64_t last = first_record + records * (t + 1) / threads;
    for (uint64_t k = first; k < last;) {
      batch.resize(std::min<uint64_t>(depth, last - k));
      for (PeerOp& op : batch) {
        op.type = OpType::kSet;
        FormatKey(k, key_bytes, &op.key);
        op.value.assign(value_bytes, 'v');
        StampValue(k, 0, &op.value);
        op.failed = false;
        ++k;
      }
      if (absl::Status s = (*client)->Execute(absl::MakeSpan(batch)); !s.ok()) {
        r.status = s;
        return;
      }
      for (const PeerOp& op : batch) r.cell.failed += op.failed ? 1 : 0;
    }
  });
  uint64_t failed = 0;
  for (const ThreadResult& r : results) {
    if (!r.status.ok()) return r.status;
    failed += r.cell.failed;
  }
  return failed;
}

absl::StatusOr<PeerCellResult> RunPeerCell(const ClientFactory& factory,
                                           const PeerCellSpec& spec) {
  if (spec.depth < 1) return absl::InvalidArgumentError("depth must be >= 1");
  if (spec.target_ops_per_second > 0 && spec.depth != 1) {
    return absl::InvalidArgumentError("the open loop runs at depth 1");
  }
  const KeyChooser chooser(spec.distribution, spec.records, spec.zipf_theta);
  const bool open_loop = spec.target_ops_per_second > 0;
  const uint64_t interval_ns =
      open_loop ? static_cast<uint64_t>(1e9 * spec.threads / spec.target_ops_per_second)
                : 0;
  std::vector<ThreadResult> results(spec.threads);
  std::atomic<int> ready{0};
  std::atomic<uint64_t> start_ns{0};

  RunOnThreads(spec.threads, [&](int t) {
    ThreadResult& r = results[t];
    PeerCellResult& cell = r.cell;
    absl::StatusOr<std::unique_ptr<PeerClient>> made = factory();
    if (!made.ok()) {
      r.status = made.status();
      ready.fetch_add(1);
      return;
    }
    PeerClient& client = **made;
    Rng rng(spec.seed * 0x9e3779b97f4a7c15ULL + static_cast<uint64_t>(t) + 1);
    std::vector<PeerOp> batch(spec.depth);
    std::vector<Kind> kinds(spec.depth);
    std::vector<uint64_t> key_numbers(spec.depth);
    std::vector<PeerOp> writes;
    std::vector<size_t> write_of(spec.depth);  // index into writes, or npos
    const uint64_t version_base = (static_cast<uint64_t>(t) + 1) << 48;
    uint64_t version = 0;

    // Thread 0 sets the common start once every thread has its connection.
    if (ready.fetch_add(1) + 1 == spec.threads) start_ns.store(NowNs() + 1000000);
    while (start_ns.load() == 0) std::this_thread::yield();
    const uint64_t start = start_ns.load();
    const uint64_t measure_from = start + static_cast<uint64_t>(spec.warmup_seconds * 1e9);
    const uint64_t end = measure_from + static_cast<uint64_t>(spec.seconds * 1e9);
    // Threads' schedules are offset so that their sends interleave.
    const uint64_t phase = open_loop ? interval_ns * t / spec.threads : 0;

    uint64_t measured_batches = 0;
    for (uint64_t i = 0;; ++i) {
      uint64_t batch_start;
      if (open_loop) {
        batch_start = start + phase + i * interval_ns;
        if (batch_start >= end) break;
        WaitUntil(batch_start);
      } else {
        batch_start = NowNs();
        if (batch_start >= end && measured_batches >= spec.min_measured_batches) {
          break;
        }
        if (batch_start < start) {
          WaitUntil(start);
          batch_start = NowNs();
        }
      }

      for (int j = 0; j < spec.depth; ++j) {
        PeerOp& op = batch[j];
        const uint64_t k = chooser.Next(rng);
        key_numbers[j] = k;
        FormatKey(k, spec.key_bytes, &op.key);
        op.ok = op.failed = false;
        if (rng.NextDouble() < spec.workload.read_proportion) {
          kinds[j] = Kind::kRead;
        } else {
          kinds[j] = spec.workload.read_modify_write ? Kind::kReadModifyWrite
                                                     : Kind::kUpdate;
        }
        if (kinds[j] == Kind::kUpdate) {
          op.type = OpType::kSet;
          op.value.assign(spec.value_bytes, 'v');
          StampValue(k, version_base | ++version, &op.value);
        } else {
          op.type = OpType::kGet;
          op.value.clear();
        }
      }
      if (absl::Status s = client.Execute(absl::MakeSpan(batch)); !s.ok()) {
        r.status = s;
        return;
      }

      // The writes that depend on the reads: fills and F's write half.
      writes.clear();
      for (int j = 0; j < spec.depth; ++j) {
        write_of[j] = std::string::npos;
        PeerOp& op = batch[j];
        if (op.type != OpType::kGet) continue;
        if (op.ok && !ValueMatches(op.value, key_numbers[j], spec.value_bytes)) {
          ++cell.bad_values;
        }
        if (op.ok && kinds[j] == Kind::kRead) continue;
        if (op.failed && kinds[j] == Kind::kRead) continue;
        write_of[j] = writes.size();
        PeerOp& w = writes.emplace_back();
        w.type = OpType::kSet;
        w.key = op.key;
        if (op.ok && op.value.size() == spec.value_bytes) {
          w.value = std::move(op.value);
        } else {
          w.value.assign(spec.value_bytes, 'v');
        }
        StampValue(key_numbers[j], version_base | ++version, &w.value);
      }
      if (!writes.empty()) {
        if (absl::Status s = client.Execute(absl::MakeSpan(writes)); !s.ok()) {
          r.status = s;
          return;
        }
      }

      cell.executed_ops += static_cast<uint64_t>(spec.depth);
      if (batch_start < measure_from) continue;
      ++measured_batches;
      for (int j = 0; j < spec.depth; ++j) {
        const PeerOp& op = batch[j];
        ++cell.ops;
        switch (kinds[j]) {
          case Kind::kRead:
            ++cell.reads;
            cell.read_hits += op.ok ? 1 : 0;
            cell.read_latency.Record(op.done_ns - batch_start);
            cell.failed += op.failed ? 1 : 0;
            if (!op.ok && !op.failed) ++cell.fills;
            r.last_done_ns = std::max(r.last_done_ns, op.done_ns);
            break;
          case Kind::kUpdate:
            cell.update_latency.Record(op.done_ns - batch_start);
            cell.failed += op.failed ? 1 : 0;
            r.last_done_ns = std::max(r.last_done_ns, op.done_ns);
            break;
          case Kind::kReadModifyWrite: {
            ++cell.reads;
            cell.read_hits += op.ok ? 1 : 0;
            const PeerOp& w = writes[write_of[j]];
            cell.rmw_latency.Record(w.done_ns - batch_start);
            cell.failed += (op.failed || w.failed) ? 1 : 0;
            r.last_done_ns = std::max(r.last_done_ns, w.done_ns);
            break;
          }
        }
      }
      for (const PeerOp& w : writes) r.last_done_ns = std::max(r.last_done_ns, w.done_ns);
    }
  });

  PeerCellResult total;
  uint64_t last_done = 0;
  for (const ThreadResult& r : results) {
    if (!r.status.ok()) return r.status;
    const PeerCellResult& c = r.cell;
    total.ops += c.ops;
    total.executed_ops += c.executed_ops;
    total.reads += c.reads;
    total.read_hits += c.read_hits;
    total.fills += c.fills;
    total.failed += c.failed;
    total.bad_values += c.bad_values;
    total.read_latency.Merge(c.read_latency);
    total.update_latency.Merge(c.update_latency);
    total.rmw_latency.Merge(c.rmw_latency);
    last_done = std::max(last_done, r.last_done_ns);
  }
  const uint64_t measure_from =
      start_ns.load() + static_cast<uint64_t>(spec.warmup_seconds * 1e9);
  total.seconds = last_done > measure_from ? (last_done - measure_from) * 1e-9 : 0;
  total.ops_per_second = total.seconds > 0 ? total.ops / total.seconds : 0;
  return total;
}

}  // namespace furrballs::bench::peers
