// bench/engine/peer_backends.cc: adapters from CacheBackend to the peers.
#include "bench/engine/peer_backends.h"

#include <cstring>
#include <string>
#include <string_view>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/synchronization/mutex.h>
#include <oneapi/tbb/concurrent_hash_map.h>
#include <rocksdb/cache.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace furrballs::bench {
namespace {

class AbslMutexBackend final : public CacheBackend {
 public:
  bool Get(const std::string& key, std::string* value) override {
    absl::ReaderMutexLock lock(&mu_);
    const auto it = map_.find(key);
    if (it == map_.end()) return false;
    value->assign(it->second);
    return true;
  }

  bool Set(const std::string& key, std::string_view value) override {
    absl::MutexLock lock(&mu_);
    map_[key].assign(value);
    return true;
  }

  uint64_t LiveValueBytes() override {
    absl::MutexLock lock(&mu_);
    uint64_t bytes = 0;
    for (const auto& [key, value] : map_) bytes += value.size();
    return bytes;
  }

  bool bounded() const override { return false; }

 private:
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::string> map_ ABSL_GUARDED_BY(mu_);
};

class TbbBackend final : public CacheBackend {
 public:
  bool Get(const std::string& key, std::string* value) override {
    Map::const_accessor entry;
    if (!map_.find(entry, key)) return false;
    value->assign(entry->second);
    return true;
  }

  bool Set(const std::string& key, std::string_view value) override {
    Map::accessor entry;
    map_.insert(entry, key);
    entry->second.assign(value);
    return true;
  }

  uint64_t LiveValueBytes() override {
    uint64_t bytes = 0;
    for (const auto& [key, value] : map_) bytes += value.size();
    return bytes;
  }

  bool bounded() const override { return false; }

 private:
  using Map = tbb::concurrent_hash_map<std::string, std::string>;
  Map map_;
};

// A RocksDB Cache used directly as a key-value cache: each entry's value is a
// heap std::string owned by the cache and freed by its deleter.
class RocksDbCacheBackend final : public CacheBackend {
 public:
  // hash_keys: key the cache by the key's 16-byte XXH3-128 hash instead of
  // the key string (HyperClockCache accepts only 16-byte keys).
  // erase_before_insert: replace by Erase + Insert (HyperClockCache keeps the
  // existing entry when a key is inserted again).
  RocksDbCacheBackend(std::shared_ptr<rocksdb::Cache> cache, bool hash_keys,
                      bool erase_before_insert)
      : cache_(std::move(cache)),
        hash_keys_(hash_keys),
        erase_before_insert_(erase_before_insert) {}

  bool Get(const std::string& key, std::string* value) override {
    char hashed[16];
    rocksdb::Cache::Handle* handle = cache_->Lookup(CacheKey(key, hashed));
    if (handle == nullptr) return false;
    value->assign(*static_cast<const std::string*>(cache_->Value(handle)));
    cache_->Release(handle);
    return true;
  }

  bool Set(const std::string& key, std::string_view value) override {
    char hashed[16];
    const rocksdb::Slice cache_key = CacheKey(key, hashed);
    if (erase_before_insert_) cache_->Erase(cache_key);
    // The charge counts the caller's key, not the 16-byte hash, so that both
    // RocksDB caches spend the budget on the same bytes.
    return cache_
        ->Insert(cache_key, new std::string(value), key.size() + value.size(),
                 &DeleteValue)
        .ok();
  }

  uint64_t LiveValueBytes() override {
    uint64_t bytes = 0;
    cache_->ApplyToAllEntries(
        [&bytes](const rocksdb::Slice&, void* value, size_t,
                 rocksdb::Cache::DeleterFn) {
          bytes += static_cast<const std::string*>(value)->size();
        },
        {});
    return bytes;
  }

  bool bounded() const override { return true; }

 private:
  static void DeleteValue(const rocksdb::Slice&, void* value) {
    delete static_cast<std::string*>(value);
  }

  rocksdb::Slice CacheKey(const std::string& key, char (&hashed)[16]) const {
    if (!hash_keys_) return rocksdb::Slice(key);
    const XXH128_hash_t h = XXH3_128bits(key.data(), key.size());
    std::memcpy(hashed, &h.low64, 8);
    std::memcpy(hashed + 8, &h.high64, 8);
    return rocksdb::Slice(hashed, sizeof(hashed));
  }

  std::shared_ptr<rocksdb::Cache> cache_;
  bool hash_keys_;
  bool erase_before_insert_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeAbslMutexBackend(
    const BackendConfig&) {
  return std::make_unique<AbslMutexBackend>();
}

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeTbbBackend(
    const BackendConfig&) {
  return std::make_unique<TbbBackend>();
}

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeRocksDbLruBackend(
    const BackendConfig& config) {
  rocksdb::LRUCacheOptions options;
  options.capacity = config.memory_budget_bytes;
  options.metadata_charge_policy = rocksdb::kDontChargeCacheMetadata;
  return std::make_unique<RocksDbCacheBackend>(rocksdb::NewLRUCache(options),
                                               /*hash_keys=*/false,
                                               /*erase_before_insert=*/false);
}

absl::StatusOr<std::unique_ptr<CacheBackend>> MakeRocksDbHyperClockBackend(
    const BackendConfig& config) {
  rocksdb::HyperClockCacheOptions options(
      config.memory_budget_bytes,
      /*_estimated_entry_charge=*/config.key_bytes + config.value_bytes);
  options.metadata_charge_policy = rocksdb::kDontChargeCacheMetadata;
  return std::make_unique<RocksDbCacheBackend>(options.MakeSharedCache(),
                                               /*hash_keys=*/true,
                                               /*erase_before_insert=*/true);
}

}  // namespace furrballs::bench
