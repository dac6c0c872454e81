#include "service/request_stats.h"

namespace furrballs::service {
namespace {

constexpr int kOverflowShard = RequestStats::kWriterShards;
constexpr int kUnassigned = -1;

// The process-wide writer-slot registry (see the protocol in the header).
// Zero-initialized before any thread runs, so it needs no construction.
std::atomic<bool> slot_taken[RequestStats::kWriterShards];

// This thread's slot. constinit keeps the hot-path read a plain TLS load
// without an initialization guard.
constinit thread_local int writer_slot = kUnassigned;

// Gives the slot back when the thread exits. A Record() from a later
// thread_local destructor then finds kOverflowShard and stays correct.
struct SlotReleaser {
  ~SlotReleaser() {
    if (writer_slot >= 0 && writer_slot < kOverflowShard) {
      // Release: this thread's last shard stores happen before the next
      // owner's acquire in ClaimSlot().
      slot_taken[writer_slot].store(false, std::memory_order_release);
    }
    writer_slot = kOverflowShard;
  }
};
thread_local SlotReleaser slot_releaser;

int ClaimSlot() {
  for (int i = 0; i < RequestStats::kWriterShards; ++i) {
    // The relaxed pre-check skips taken slots without writing their line.
    if (slot_taken[i].load(std::memory_order_relaxed)) continue;
    bool expected = false;
    if (slot_taken[i].compare_exchange_strong(expected, true,
                                              std::memory_order_acquire,
                                              std::memory_order_relaxed)) {
      writer_slot = i;
      // Touching the releaser constructs it, which registers its destructor
      // for this thread's exit.
      static_cast<void>(&slot_releaser);
      return i;
    }
  }
  writer_slot = kOverflowShard;
  return kOverflowShard;
}

// Single-writer increment: only the slot's owner writes this counter, so a
// load and a store suffice; both are atomic so Snapshot() may read
// concurrently.
void AddOwned(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n,
                std::memory_order_relaxed);
}

void AddShared(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.fetch_add(n, std::memory_order_relaxed);
}

constexpr std::string_view kOpNames[kRequestOpCount] = {
    "get", "set", "delete", "touch", "multi_get", "multi_set", "pipeline",
    "stats", "batch"};

constexpr std::string_view kCodeNames[kStatusCodeCount] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

constexpr int kUnknownCode = 2;

}  // namespace

std::string_view RequestOpName(RequestOp op) {
  return kOpNames[static_cast<int>(op)];
}

std::string_view StatusCodeName(int code) {
  return code >= 0 && code < kStatusCodeCount ? kCodeNames[code]
                                              : kCodeNames[kUnknownCode];
}

int LatencyBucketOf(uint64_t ns) {
  // 14 sorted bounds: a linear scan is as fast as a binary search here and
  // usually stops within the first few.
  int i = 0;
  while (i < static_cast<int>(kLatencyBucketBoundsNs.size()) &&
         ns > kLatencyBucketBoundsNs[i]) {
    ++i;
  }
  return i;
}

RequestStats::RequestStats() : shards_(new Shard[kWriterShards + 1]()) {}

void RequestStats::Record(RequestOp op, int code, Clock::duration latency) {
  int slot = writer_slot;
  if (slot == kUnassigned) slot = ClaimSlot();
  Shard& shard = shards_[slot];
  const int o = static_cast<int>(op);
  if (code < 0 || code >= kStatusCodeCount) code = kUnknownCode;
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(latency).count();
  const uint64_t latency_ns = ns < 0 ? 0 : static_cast<uint64_t>(ns);
  const int bucket = LatencyBucketOf(latency_ns);
  if (slot != kOverflowShard) {
    AddOwned(shard.requests[o][code], 1);
    AddOwned(shard.latency_buckets[o][bucket], 1);
    AddOwned(shard.latency_sum_ns[o], latency_ns);
  } else {
    AddShared(shard.requests[o][code], 1);
    AddShared(shard.latency_buckets[o][bucket], 1);
    AddShared(shard.latency_sum_ns[o], latency_ns);
  }
}

RequestStatsSnapshot RequestStats::Snapshot() const {
  RequestStatsSnapshot out;
  for (int s = 0; s <= kWriterShards; ++s) {
    const Shard& shard = shards_[s];
    for (int o = 0; o < kRequestOpCount; ++o) {
      for (int c = 0; c < kStatusCodeCount; ++c) {
        out.requests[o][c] +=
            shard.requests[o][c].load(std::memory_order_relaxed);
      }
      for (int b = 0; b < kLatencyBucketCount; ++b) {
        out.latency_buckets[o][b] +=
            shard.latency_buckets[o][b].load(std::memory_order_relaxed);
      }
      out.latency_sum_ns[o] +=
          shard.latency_sum_ns[o].load(std::memory_order_relaxed);
    }
  }
  return out;
}

}  // namespace furrballs::service
