// bench/engine/peer_backends.h: the peers FurrBall is measured against.
//
// Thread safety: every backend returned is safe for concurrent Get/Set.
//
// - absl_mutex: absl::flat_hash_map<std::string, std::string> under one
//   absl::Mutex (shared for Get, exclusive for Set). Unbounded: it never
//   evicts, so it holds every record whatever the budget.
// - tbb: tbb::concurrent_hash_map<std::string, std::string>. Unbounded.
// - rocksdb_lru: rocksdb::NewLRUCache(budget), default sharding.
// - rocksdb_hcc: RocksDB's HyperClockCache with estimated_entry_charge equal to
//   the exact per-entry charge. Its 7.8 keys must be exactly 16 bytes, so the
//   backend hashes the key string to 128 bits (XXH3) inside the timed call, and
//   since it ignores an Insert of a key that is already present, an update is
//   Erase + Insert.
// Both RocksDB caches charge each entry key bytes + value bytes and use
// kDontChargeCacheMetadata, so that the budget bounds entry bytes and the
// caches' own metadata comes on top, as FurrBall's does (its budget bounds the
// value pages; MetadataBytes() is extra).
#ifndef FURRBALLS_BENCH_ENGINE_PEER_BACKENDS_H_
#define FURRBALLS_BENCH_ENGINE_PEER_BACKENDS_H_

#include <memory>

#include <absl/status/statusor.h>

#include "bench/engine/cache_backend.h"

namespace furrballs::bench {

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeAbslMutexBackend(
    const BackendConfig& config);
absl::StatusOr<std::unique_ptr<CacheBackend>> MakeTbbBackend(
    const BackendConfig& config);
absl::StatusOr<std::unique_ptr<CacheBackend>> MakeRocksDbLruBackend(
    const BackendConfig& config);
absl::StatusOr<std::unique_ptr<CacheBackend>> MakeRocksDbHyperClockBackend(
    const BackendConfig& config);

}  // namespace furrballs::bench

#endif  // FURRBALLS_BENCH_ENGINE_PEER_BACKENDS_H_
