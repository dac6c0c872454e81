#include "engine/spill/spill_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <system_error>
#include <utility>

#include <absl/strings/str_cat.h>
#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "engine/spill/spill_manifest.h"

namespace furrballs {
namespace spill {
namespace {

constexpr char kManifestKey[] = "furrballs.spill.manifest";

std::string PageKey(uint64_t page_id) {
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) {
    k[i] = static_cast<char>(page_id >> (56 - 8 * i));
  }
  return k;
}

absl::Status Closed() {
  return absl::UnavailableError(
      "the spill store is closed (after Close, or a failed reopen after a "
      "disk error; the next write retries)");
}

std::string NodeFamily(int node) { return absl::StrCat("node", node); }

absl::Status ToStatus(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  const std::string msg = absl::StrCat(what, ": ", s.ToString());
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsNoSpace()) return absl::ResourceExhaustedError(msg);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  // E.g. a directory written with options this build cannot read.
  if (s.IsNotSupported()) return absl::FailedPreconditionError(msg);
  return absl::UnavailableError(msg);
}

// Creates the store's directory (one level, as RocksDB would) and turns
// what keeps it from being one into the code of the cause, with the path:
// RocksDB reports all of these as IOError.
absl::Status PrepareDirectory(const std::string& dir) {
  if (mkdir(dir.c_str(), 0755) == 0) return absl::OkStatus();
  const int err = errno;
  struct stat st;
  if (err == EEXIST && stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    return absl::OkStatus();
  }
  const std::string cause = std::error_code(err, std::generic_category()).message();
  switch (err) {
    case EEXIST:
      return absl::FailedPreconditionError(absl::StrCat(
          "spill store: ", dir, " exists and is not a directory"));
    case ENOTDIR:
      return absl::FailedPreconditionError(absl::StrCat(
          "spill store: a component of ", dir, " is not a directory"));
    case ENOENT:
      return absl::NotFoundError(absl::StrCat(
          "spill store: cannot create ", dir,
          ": its parent directory does not exist"));
    case EACCES:
    case EPERM:
    case EROFS:
      return absl::PermissionDeniedError(
          absl::StrCat("spill store: cannot create ", dir, ": ", cause));
    case ENOSPC:
    case EDQUOT:
      return absl::ResourceExhaustedError(
          absl::StrCat("spill store: cannot create ", dir, ": ", cause));
    default:
      return absl::UnavailableError(
          absl::StrCat("spill store: cannot create ", dir, ": ", cause));
  }
}

// The pid of another process that holds `dir`/LOCK (RocksDB's fcntl write
// lock, taken for as long as a DB is open), or 0. REQUIRES: no store of this
// process has `dir` open: closing our descriptor of LOCK would drop the
// fcntl locks this process holds on it.
pid_t LockHolder(const std::string& dir) {
  const int fd = open((dir + "/LOCK").c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  struct flock lock = {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  const bool held = fcntl(fd, F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
  close(fd);
  return held ? lock.l_pid : 0;
}

// The directories open stores of this process use (canonical paths), so
// that a second one is refused with a clear error before RocksDB is asked,
// and LockHolder is never used on them.
struct OpenDirs {
  Mutex mu;
  std::set<std::string> dirs ABSL_GUARDED_BY(mu);
};
OpenDirs& OpenDirsOfThisProcess() {
  static OpenDirs* const open_dirs = new OpenDirs;  // never destroyed
  return *open_dirs;
}

rocksdb::ColumnFamilyOptions PageFamilyOptions(uint64_t write_buffer_bytes) {
  rocksdb::ColumnFamilyOptions o;
  o.enable_blob_files = true;
  o.min_blob_size = 0;
  o.blob_file_size = uint64_t{256} << 20;
  o.blob_compression_type = rocksdb::kNoCompression;
  o.enable_blob_garbage_collection = true;
  o.blob_garbage_collection_age_cutoff = 0.5;
  o.compression = rocksdb::kNoCompression;
  o.write_buffer_size = write_buffer_bytes;
  o.max_write_buffer_number = 2;
  o.target_file_size_base = uint64_t{64} << 20;
  return o;
}

}  // namespace

SpillStore::SpillStore(const SpillStoreOptions& options)
    : options_(options) {
  MutexLock l(&mu_);
  pages_.resize(options.node_count);
  removed_pages_.resize(options.node_count);
}

SpillStore::~SpillStore() {
  CloseDb();
  if (!registered_dir_.empty()) {
    OpenDirs& open = OpenDirsOfThisProcess();
    MutexLock l(&open.mu);
    open.dirs.erase(registered_dir_);
  }
}

void SpillStore::CloseDb() {
  if (db_ == nullptr) return;
  for (rocksdb::ColumnFamilyHandle* h : handles_) {
    db_->DestroyColumnFamilyHandle(h);
  }
  handles_.clear();
  delete db_;
  db_ = nullptr;
}

absl::Status SpillStore::OpenDb() {
  rocksdb::DBOptions db_options;
  db_options.create_if_missing = true;
  db_options.create_missing_column_families = true;
  db_options.bytes_per_sync = uint64_t{1} << 20;
  db_options.max_background_jobs = 2;
  db_options.keep_log_file_num = 2;
  db_options.paranoid_checks = true;
  // The store resumes itself on the next write (Resume), so RocksDB's own
  // background retries would only race with it.
  db_options.max_bgerror_resume_count = 0;
  if (options_.env != nullptr) db_options.env = options_.env;

  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  families.emplace_back(rocksdb::kDefaultColumnFamilyName,
                        rocksdb::ColumnFamilyOptions());
  for (int n = 0; n < options_.node_count; ++n) {
    families.emplace_back(NodeFamily(n),
                          PageFamilyOptions(options_.write_buffer_bytes));
  }
  // Families of an earlier run with more nodes must be opened too.
  std::vector<std::string> existing;
  if (rocksdb::DB::ListColumnFamilies(db_options, options_.dir, &existing)
          .ok()) {
    for (const std::string& name : existing) {
      bool known = false;
      for (const auto& f : families) known |= f.name == name;
      if (!known) {
        families.emplace_back(name,
                              PageFamilyOptions(options_.write_buffer_bytes));
      }
    }
  }
  rocksdb::DB* db = nullptr;
  const rocksdb::Status s =
      rocksdb::DB::Open(db_options, options_.dir, families, &handles_, &db);
  if (!s.ok()) {
    if (const pid_t holder = LockHolder(options_.dir); holder != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "spill store: ", options_.dir, " is in use by process ", holder,
          " (it holds ", options_.dir,
          "/LOCK); every cache needs a data directory of its own"));
    }
    return ToStatus(s, absl::StrCat("opening the spill store in ",
                                    options_.dir));
  }
  db_ = db;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SpillStore>> SpillStore::Open(
    const SpillStoreOptions& options, std::optional<std::string>* manifest) {
  manifest->reset();
  if (options.dir.empty()) {
    return absl::InvalidArgumentError("spill store: empty data directory");
  }
  if (options.node_count < 1) {
    return absl::InvalidArgumentError("spill store: node_count < 1");
  }
  if (absl::Status dir = PrepareDirectory(options.dir); !dir.ok()) return dir;
  std::unique_ptr<SpillStore> store(new SpillStore(options));
  {
    std::error_code error;
    const std::string canonical =
        std::filesystem::canonical(options.dir, error).string();
    if (error) {
      return absl::UnavailableError(absl::StrCat(
          "spill store: cannot resolve ", options.dir, ": ", error.message()));
    }
    OpenDirs& open = OpenDirsOfThisProcess();
    MutexLock l(&open.mu);
    if (!open.dirs.insert(canonical).second) {
      return absl::FailedPreconditionError(absl::StrCat(
          "spill store: ", options.dir,
          " is in use by this process (another cache has it open); every "
          "cache needs a data directory of its own"));
    }
    store->registered_dir_ = canonical;
  }
  absl::Status opened = store->OpenDb();
  if (absl::IsDataLoss(opened)) {
    // A corrupted store is only a colder cache: start over.
    store->corrupt_on_open_ = true;
    rocksdb::Options destroy;
    if (options.env != nullptr) destroy.env = options.env;
    const rocksdb::Status d = rocksdb::DestroyDB(options.dir, destroy);
    if (!d.ok()) {
      return ToStatus(d, "clearing a corrupted spill store (" +
                             std::string(opened.message()) + ")");
    }
    opened = store->OpenDb();
  }
  if (!opened.ok()) return opened;

  std::string bytes;
  const rocksdb::Status got = store->db_->Get(
      rocksdb::ReadOptions(), store->handles_[0], kManifestKey, &bytes);
  bool warm = false;
  if (got.ok() && !options.cold_start) {
    // Take the manifest out before anything else: from here on a crash
    // must find no manifest.
    rocksdb::WriteOptions sync;
    sync.sync = true;
    const rocksdb::Status del =
        store->db_->Delete(sync, store->handles_[0], kManifestKey);
    if (!del.ok()) return ToStatus(del, "removing the spill manifest");
    absl::StatusOr<SpillManifest> decoded =
        DecodeSpillManifest(bytes, options.node_count);
    if (decoded.ok()) {
      warm = true;
      MutexLock l(&store->mu_);
      store->pages_ = std::move(decoded->pages);
      for (const NodePages& node_pages : store->pages_) {
        for (const auto& [id, size] : node_pages) {
          store->bytes_ += size;
          ++store->page_count_;
        }
      }
      store->next_page_id_.store(decoded->next_page_id,
                                 std::memory_order_relaxed);
      *manifest = std::move(decoded->engine);
    }
  } else if (!got.ok() && !got.IsNotFound()) {
    return ToStatus(got, "reading the spill manifest");
  }
  if (!warm) {
    // Cold: nothing stored can be vouched for without its index.
    manifest->reset();
    {
      MutexLock l(&store->mu_);
      for (auto& p : store->pages_) p.clear();
      store->bytes_ = 0;
      store->page_count_ = 0;
    }
    store->CloseDb();
    rocksdb::Options destroy;
    if (options.env != nullptr) destroy.env = options.env;
    const rocksdb::Status d = rocksdb::DestroyDB(options.dir, destroy);
    if (!d.ok()) return ToStatus(d, "clearing the spill store for a cold start");
    absl::Status reopened = store->OpenDb();
    if (!reopened.ok()) return reopened;
  }
  return store;
}

absl::Status SpillStore::Resume() {
  if (!needs_resume_.load(std::memory_order_relaxed)) return absl::OkStatus();
  std::unique_lock<std::shared_mutex> exclusive(db_mu_);
  if (!needs_resume_.load(std::memory_order_relaxed)) return absl::OkStatus();
  if (db_ == nullptr || !db_->Resume().ok()) {
    // Not resumable in place (a hard error, or RocksDB's own recovery is
    // still running): reopen. Pages still only in the memtable may be lost
    // (they were written without the WAL); their reads then miss.
    CloseDb();
    absl::Status reopened = OpenDb();
    if (!reopened.ok()) return reopened;
  }
  needs_resume_.store(false, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::Status SpillStore::Put(int node, uint64_t page_id, std::string_view blob,
                             std::vector<std::pair<int, uint64_t>>* removed) {
  if (node < 0 || node >= options_.node_count) {
    return absl::InvalidArgumentError(absl::StrCat("spill: no node ", node));
  }
  absl::Status resumed = Resume();
  if (!resumed.ok()) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    return resumed;
  }
  std::shared_lock<std::shared_mutex> shared(db_mu_);
  if (db_ == nullptr) return Closed();
  rocksdb::WriteOptions w;
  w.disableWAL = true;  // see the top of the header
  const rocksdb::Status s =
      db_->Put(w, handles_[node + 1], PageKey(page_id),
               rocksdb::Slice(blob.data(), blob.size()));
  if (!s.ok()) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    needs_resume_.store(true, std::memory_order_relaxed);
    return ToStatus(s, absl::StrCat("spilling page ", page_id, " of node ",
                                    node));
  }
  MutexLock l(&mu_);
  auto [it, inserted] = pages_[node].emplace(page_id, blob.size());
  if (inserted) {
    ++page_count_;
  } else {
    bytes_ -= it->second;
    it->second = blob.size();
  }
  bytes_ += blob.size();
  EnforceBudget(removed);
  return absl::OkStatus();
}

void SpillStore::EnforceBudget(std::vector<std::pair<int, uint64_t>>* removed) {
  if (options_.disk_budget_bytes == 0) return;
  rocksdb::WriteOptions w;
  w.disableWAL = true;
  while (bytes_ > options_.disk_budget_bytes && page_count_ > 0) {
    int oldest_node = -1;
    uint64_t oldest_id = UINT64_MAX;
    for (int n = 0; n < options_.node_count; ++n) {
      if (!pages_[n].empty() && pages_[n].begin()->first < oldest_id) {
        oldest_id = pages_[n].begin()->first;
        oldest_node = n;
      }
    }
    const rocksdb::Status s =
        db_->Delete(w, handles_[oldest_node + 1], PageKey(oldest_id));
    if (!s.ok()) {
      write_errors_.fetch_add(1, std::memory_order_relaxed);
      needs_resume_.store(true, std::memory_order_relaxed);
      return;
    }
    bytes_ -= pages_[oldest_node].begin()->second;
    pages_[oldest_node].erase(pages_[oldest_node].begin());
    --page_count_;
    removed_for_budget_.fetch_add(1, std::memory_order_relaxed);
    removed_pages_[oldest_node].push_back(oldest_id);
    if (removed != nullptr) removed->emplace_back(oldest_node, oldest_id);
  }
}

std::vector<uint64_t> SpillStore::TakeRemovedPages(int node) {
  MutexLock l(&mu_);
  if (node < 0 || node >= options_.node_count) return {};
  return std::exchange(removed_pages_[node], {});
}

absl::StatusOr<std::string> SpillStore::Get(int node, uint64_t page_id) {
  if (node < 0 || node >= options_.node_count) {
    return absl::InvalidArgumentError(absl::StrCat("spill: no node ", node));
  }
  std::shared_lock<std::shared_mutex> shared(db_mu_);
  if (db_ == nullptr) return Closed();
  std::string value;
  rocksdb::ReadOptions r;
  r.verify_checksums = true;
  r.fill_cache = false;  // a reloaded page lives in memory again
  const rocksdb::Status s =
      db_->Get(r, handles_[node + 1], PageKey(page_id), &value);
  if (!s.ok()) {
    if (!s.IsNotFound()) read_errors_.fetch_add(1, std::memory_order_relaxed);
    return ToStatus(s, absl::StrCat("reading spilled page ", page_id,
                                    " of node ", node));
  }
  return value;
}

absl::Status SpillStore::Delete(int node, uint64_t page_id) {
  if (node < 0 || node >= options_.node_count) {
    return absl::InvalidArgumentError(absl::StrCat("spill: no node ", node));
  }
  {
    MutexLock l(&mu_);
    auto it = pages_[node].find(page_id);
    if (it == pages_[node].end()) return absl::OkStatus();
    bytes_ -= it->second;
    --page_count_;
    pages_[node].erase(it);
  }
  std::shared_lock<std::shared_mutex> shared(db_mu_);
  if (db_ == nullptr) return Closed();
  rocksdb::WriteOptions w;
  w.disableWAL = true;
  const rocksdb::Status s = db_->Delete(w, handles_[node + 1], PageKey(page_id));
  if (!s.ok()) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    needs_resume_.store(true, std::memory_order_relaxed);
  }
  return ToStatus(s, absl::StrCat("deleting spilled page ", page_id));
}

absl::Status SpillStore::Close(std::string_view manifest) {
  absl::Status resumed = Resume();
  if (!resumed.ok()) return resumed;
  std::unique_lock<std::shared_mutex> exclusive(db_mu_);
  if (db_ == nullptr) return Closed();
  rocksdb::FlushOptions f;
  f.wait = true;
  std::vector<rocksdb::ColumnFamilyHandle*> families(handles_.begin() + 1,
                                                     handles_.end());
  rocksdb::Status s = db_->Flush(f, families);
  if (!s.ok()) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    needs_resume_.store(true, std::memory_order_relaxed);
    return ToStatus(s, "flushing the spill store");
  }

  std::string bytes;
  {
    MutexLock l(&mu_);
    bytes = EncodeSpillManifest(next_page_id_.load(std::memory_order_relaxed),
                                pages_, manifest);
  }
  rocksdb::WriteOptions sync;
  sync.sync = true;
  s = db_->Put(sync, handles_[0], kManifestKey, bytes);
  if (!s.ok()) {
    write_errors_.fetch_add(1, std::memory_order_relaxed);
    needs_resume_.store(true, std::memory_order_relaxed);
    return ToStatus(s, "writing the spill manifest");
  }
  CloseDb();
  return absl::OkStatus();
}

SpillStoreStats SpillStore::stats() const {
  SpillStoreStats s;
  {
    MutexLock l(&mu_);
    s.pages = page_count_;
    s.bytes = bytes_;
    for (const auto& node_pages : pages_) {
      uint64_t b = 0;
      for (const auto& [id, size] : node_pages) b += size;
      s.node_bytes.push_back(b);
    }
  }
  s.pages_removed_for_budget =
      removed_for_budget_.load(std::memory_order_relaxed);
  s.write_errors = write_errors_.load(std::memory_order_relaxed);
  s.read_errors = read_errors_.load(std::memory_order_relaxed);
  s.corrupt_on_open = corrupt_on_open_;
  return s;
}

}  // namespace spill
}  // namespace furrballs
