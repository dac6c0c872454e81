// bench/engine/cache_backend.h: the interface every cache under test offers
// the YCSB driver.
//
// Thread safety: implementations are safe for concurrent Get/Set from any
// number of threads. LiveValueBytes() is called once, after the threads have
// joined.
//
// Fairness rules the driver relies on:
// - Every backend receives the key as a string and does its own hashing and
//   key handling inside the timed call; no backend is handed a precomputed
//   hash.
// - Get copies the value into the caller's string (the same reused buffer for
//   every backend), so a hit always pays for one copy out of the cache.
// - Set stores a private copy of the value and replaces any earlier value of
//   the key, so that a later Get returns the newest value.
#ifndef FURRBALLS_BENCH_ENGINE_CACHE_BACKEND_H_
#define FURRBALLS_BENCH_ENGINE_CACHE_BACKEND_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <absl/status/statusor.h>

namespace furrballs::bench {

// What a backend may size itself by. Every bounded backend gets the same
// memory_budget_bytes.
struct BackendConfig {
  size_t memory_budget_bytes = 0;
  size_t key_bytes = 0;
  size_t value_bytes = 0;
  uint64_t record_count = 0;
  int threads = 1;
  // FurrBallOptions::max_keys_per_node: 0 = planned for entries of exactly
  // this key and value size (expected_entry_bytes), -1 = the engine's
  // default, N > 0 = N.
  int64_t furrball_keys_per_node = 0;
};

class CacheBackend {
 public:
  virtual ~CacheBackend() = default;

  // Copies the key's value into *value; false on a miss.
  virtual bool Get(const std::string& key, std::string* value) = 0;
  // Inserts or replaces; false if the backend refused the write.
  virtual bool Set(const std::string& key, std::string_view value) = 0;

  // Value bytes of the entries resident now (not timed).
  virtual uint64_t LiveValueBytes() = 0;
  // True if the backend holds at most the memory budget (and so can miss).
  virtual bool bounded() const = 0;

  // Backend-specific facts worth a footnote in the report (metadata size,
  // evictions), gathered after the run; empty if none.
  virtual std::string Describe() { return ""; }
};

using BackendFactory =
    absl::StatusOr<std::unique_ptr<CacheBackend>> (*)(const BackendConfig&);

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_CACHE_BACKEND_H_
