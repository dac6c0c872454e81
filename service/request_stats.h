// service/request_stats.h: per-operation request counts by status code and
// per-operation latency histograms for the gRPC service, sharded per thread.
//
// Thread safety: Record() is thread-safe and wait-free; Snapshot() is
// thread-safe and may run concurrently with any number of Record() calls.
//
// Knows neither the engine, nor gRPC, nor Prometheus: an operation is a
// RequestOp, a status is the integer value of a gRPC status code (0..16),
// and metrics/ turns a RequestStatsSnapshot into exposition at scrape time.
//
// Protocol (report §3.7: no shared atomic on the request path). A process-
// wide registry hands each recording thread a writer slot in
// [0, kWriterShards) on its first Record(): a compare_exchange(false -> true,
// acquire) on the slot's `taken` flag. A thread keeps its slot until it
// exits, when a thread_local destructor gives it back with a release store of
// false. Every RequestStats has one cache-line-aligned Shard per slot, so
// while a thread owns slot i it is the only writer of shard i in every
// RequestStats: it increments with a relaxed load and a relaxed store (no
// read-modify-write, no lock prefix), and its lines stay in its own cache.
// The release/acquire pair on `taken` orders a former owner's last stores
// before the next owner's first load, so a reused slot continues the counts.
// Threads beyond kWriterShards share one overflow shard and increment it with
// relaxed fetch_add, which is correct, only slower. Snapshot() sums the
// shards with relaxed loads: each counter it reads is a value that counter
// had (atomics make the concurrent read race-free), but counters are not read
// at one instant, so a request may be counted before its histogram bucket.
#ifndef FURRBALLS_SERVICE_REQUEST_STATS_H_
#define FURRBALLS_SERVICE_REQUEST_STATS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

namespace furrballs::service {

// The RPC a request belongs to. A pipelined stream counts each of its items
// (and a refused stream) under kPipeline; a Batch stream counts each of its
// messages (and a refused stream) under kBatch.
enum class RequestOp : uint8_t {
  kGet = 0,
  kSet,
  kDelete,
  kTouch,
  kMultiGet,
  kMultiSet,
  kPipeline,
  kStats,
  kBatch,
};
inline constexpr int kRequestOpCount = 9;

// "get", "set", "delete", "touch", "multi_get", "multi_set", "pipeline",
// "stats", "batch": the `op` label values.
std::string_view RequestOpName(RequestOp op);

// gRPC status codes are 0 (OK) .. 16 (UNAUTHENTICATED).
inline constexpr int kStatusCodeCount = 17;
// The canonical gRPC name of `code` ("OK", "INVALID_ARGUMENT", ...): the
// `code` label values. Out-of-range codes are recorded as UNKNOWN.
std::string_view StatusCodeName(int code);

// Upper bounds (inclusive, as Prometheus `le`) of the latency buckets, in
// nanoseconds. Latency is measured inside the server, from the handler's
// entry to Finish, so it excludes the network and the gRPC transport: most
// requests take a few to a few tens of microseconds, which is why the scale
// starts at 5 µs; the upper edges sit at typical SLOs (1 ms, 10 ms, 100 ms).
// A last, implicit bucket (+Inf) takes everything above 1 s.
inline constexpr std::array<uint64_t, 14> kLatencyBucketBoundsNs = {
    5'000,         10'000,        25'000,      50'000,     100'000,
    250'000,       500'000,       1'000'000,   2'500'000,  5'000'000,
    10'000'000,    25'000'000,    100'000'000, 1'000'000'000};
inline constexpr int kLatencyBucketCount =
    static_cast<int>(kLatencyBucketBoundsNs.size()) + 1;

// The bucket a latency of `ns` nanoseconds falls into.
int LatencyBucketOf(uint64_t ns);

// Totals over all threads at one Snapshot(). Buckets are per bucket, not
// cumulative.
struct RequestStatsSnapshot {
  std::array<std::array<uint64_t, kStatusCodeCount>, kRequestOpCount>
      requests{};
  std::array<std::array<uint64_t, kLatencyBucketCount>, kRequestOpCount>
      latency_buckets{};
  std::array<uint64_t, kRequestOpCount> latency_sum_ns{};
};

class RequestStats {
 public:
  using Clock = std::chrono::steady_clock;

  // Writer slots with a shard of their own; threads beyond share the
  // overflow shard. gRPC's callback threads plus the node workers fit in 64
  // on the machines this targets.
  static constexpr int kWriterShards = 64;

  RequestStats();
  RequestStats(const RequestStats&) = delete;
  RequestStats& operator=(const RequestStats&) = delete;

  // Counts one finished request of `op` with gRPC status `code` that took
  // `latency` (negative latencies count as zero).
  void Record(RequestOp op, int code, Clock::duration latency);

  // Record() with the latency from `start` to now.
  void RecordSince(RequestOp op, int code, Clock::time_point start) {
    Record(op, code, Clock::now() - start);
  }

  RequestStatsSnapshot Snapshot() const;

 private:
  struct alignas(64) Shard {
    std::atomic<uint64_t> requests[kRequestOpCount][kStatusCodeCount];
    std::atomic<uint64_t> latency_buckets[kRequestOpCount]
                                         [kLatencyBucketCount];
    std::atomic<uint64_t> latency_sum_ns[kRequestOpCount];
  };
  static_assert(alignof(Shard) == 64 && sizeof(Shard) % 64 == 0,
                "each writer's shard must own whole cache lines, or writers "
                "on neighbouring shards would false-share");
  static_assert(std::atomic<uint64_t>::is_always_lock_free,
                "relaxed counters must be plain loads and stores");

  // kWriterShards owned shards, then the shared overflow shard.
  std::unique_ptr<Shard[]> shards_;
};

}  // namespace furrballs::service

#endif  // FURRBALLS_SERVICE_REQUEST_STATS_H_
