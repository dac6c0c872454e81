// engine/spill/spill_store.h: SpillStore, the spill tier's RocksDB (report
// §2.9.5, §2.9.7): page blobs by node and page id, a disk budget with
// oldest-first removal, and the manifest that makes a restart warm.
//
// Thread safety: thread-safe. Put, Get and Delete may be called from any
// thread (RocksDB is); the budget bookkeeping is under a mutex.
//
// Layout. One RocksDB under `dir`, a column family per node ("node0",
// "node1", ...) holding key = page id (8 bytes, big-endian, so that
// iteration order is age order) -> PageBlob bytes, and the default column
// family for metadata (the manifest).
//
// Lifecycle and what a crash may leave:
//   - Pages are written without the WAL: a crash loses them anyway (below),
//     so the WAL would only add a second copy of every blob.
//   - Close(manifest) flushes every column family, then writes the
//     manifest (the caller's bytes plus the store's own page list) with a
//     synced WAL write. Only a store closed that way is reopened warm.
//   - Open reads and *deletes* the manifest (synced) before anything else,
//     so a crash at any later point leaves no manifest. Open without a
//     manifest (first start, or after a crash) destroys the old contents:
//     a spilled page is only meaningful with the in-memory index that
//     names it, and that index is lost in a crash. So after a crash the
//     cache is cold; it never serves a page it cannot vouch for.
//
// Tuning for the write pattern (whole pages, 64 KiB to 64 MiB, written
// once, read rarely, deleted in age order): integrated BlobDB
// (enable_blob_files, min_blob_size 0) so the LSM holds only small blob
// references and compaction never rewrites the values; blob garbage
// collection reclaims space of deleted pages; no compression (values are
// the client's bytes, often already compressed, and the spill path is
// latency-sensitive); 64 MiB write buffers and 256 MiB blob files so writes
// go out as large sequential files; bytes_per_sync 1 MiB to avoid writeback
// bursts. See docs/spill.md.
#ifndef FURRBALLS_ENGINE_SPILL_SPILL_STORE_H_
#define FURRBALLS_ENGINE_SPILL_SPILL_STORE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "engine/common/sync.h"
#include "engine/spill/spill_manifest.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class Env;
}  // namespace rocksdb

namespace furrballs {
namespace spill {

struct SpillStoreOptions {
  // The data directory (created if missing).
  std::string dir;
  // Column families node0 .. node(node_count - 1).
  int node_count = 1;
  // Bytes of page blobs kept; beyond it the oldest pages (lowest page id,
  // over all nodes) are removed. 0 = no limit.
  uint64_t disk_budget_bytes = uint64_t{1} << 30;
  // Memtable bytes per node (RocksDB write_buffer_size; at most two per node
  // exist at once). Memory outside the cache's budget: FurrBall sizes it
  // from the node budget.
  uint64_t write_buffer_bytes = uint64_t{64} << 20;
  // Tests inject faults through a custom Env; nullptr = the default Env.
  rocksdb::Env* env = nullptr;
  // Discard whatever the directory holds, manifest or not (a server started
  // with warm restart off).
  bool cold_start = false;
};

struct SpillStoreStats {
  uint64_t pages = 0;                // stored now
  uint64_t bytes = 0;                // blob bytes stored now
  std::vector<uint64_t> node_bytes;  // the same, per node
  uint64_t pages_removed_for_budget = 0;
  uint64_t write_errors = 0;
  uint64_t read_errors = 0;
  // Open found the store corrupted and started it over (cold).
  bool corrupt_on_open = false;
};

class SpillStore {
 public:
  // Opens (or creates) the store. If a manifest from a graceful Close is
  // present it is removed from the store and returned in *manifest;
  // otherwise the old contents are destroyed and *manifest is nullopt. A
  // store RocksDB finds corrupted is destroyed and started cold too.
  //
  // The directory is created if its parent exists. A store that cannot open
  // names the directory and the cause, with the cause's code: NotFound (no
  // parent directory), FailedPrecondition (not a directory; in use by
  // another store of this process, or by another process, named by pid),
  // PermissionDenied, ResourceExhausted (no space), Unavailable (other I/O
  // errors).
  static absl::StatusOr<std::unique_ptr<SpillStore>> Open(
      const SpillStoreOptions& options, std::optional<std::string>* manifest);

  ~SpillStore();  // closes without a manifest (the next Open is cold)
  SpillStore(const SpillStore&) = delete;
  SpillStore& operator=(const SpillStore&) = delete;

  // A page id never used before in this data directory (ids survive a warm
  // restart). Ids grow with time, so the lowest is the oldest page.
  uint64_t NewPageId() {
    return next_page_id_.fetch_add(1, std::memory_order_relaxed);
  }

  // Stores a blob, then removes the oldest pages while over budget. The ids
  // of removed pages go to *removed (may be nullptr). An I/O error leaves
  // the store usable: the next call tries to resume RocksDB first.
  absl::Status Put(int node, uint64_t page_id, std::string_view blob,
                   std::vector<std::pair<int, uint64_t>>* removed = nullptr);
  // The pages of `node` the budget removed since the last call, oldest
  // first, whichever node's Put removed them: the node's index drops their
  // keys (they would only miss).
  std::vector<uint64_t> TakeRemovedPages(int node);
  // NotFound if the page is not stored (never written, deleted, or removed
  // for the budget).
  absl::StatusOr<std::string> Get(int node, uint64_t page_id);
  absl::Status Delete(int node, uint64_t page_id);

  // Graceful shutdown: flushes, writes the manifest, closes. The store must
  // not be used afterwards.
  absl::Status Close(std::string_view manifest);

  SpillStoreStats stats() const;
  int node_count() const { return options_.node_count; }

 private:
  explicit SpillStore(const SpillStoreOptions& options);
  absl::Status OpenDb();
  absl::Status Resume();
  void CloseDb();
  // Removes the oldest pages until within budget. REQUIRES: mu_ held.
  void EnforceBudget(std::vector<std::pair<int, uint64_t>>* removed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SpillStoreOptions options_;
  // The directory as registered among this process's open stores (Open
  // refuses a second store on it with a clear error); "" if not registered.
  std::string registered_dir_;
  // Shared by every use of db_, exclusive to reopen it (Resume) or close it.
  // A std::shared_mutex (pthread rwlock) so that TSAN sees it.
  mutable std::shared_mutex db_mu_;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> handles_;  // [0] = default

  mutable Mutex mu_;
  // Every stored page and its size, per node: the budget's bookkeeping and
  // the page list the manifest persists.
  std::vector<NodePages> pages_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t page_count_ ABSL_GUARDED_BY(mu_) = 0;
  // Per node, pages removed for the budget and not yet taken.
  std::vector<std::vector<uint64_t>> removed_pages_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> next_page_id_{1};
  std::atomic<uint64_t> removed_for_budget_{0};
  std::atomic<uint64_t> write_errors_{0};
  std::atomic<uint64_t> read_errors_{0};
  std::atomic<bool> needs_resume_{false};
  bool corrupt_on_open_ = false;  // set by Open, then immutable
};

}  // namespace spill
}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_SPILL_SPILL_STORE_H_
