// SpillStore over a real RocksDB in a temporary directory: pages by node,
// the disk budget, warm and cold reopen, and disk faults injected through a
// FileSystem wrapper.
#include "engine/spill/spill_store.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include "engine/spill/fault_injection_fs.h"
#include "engine/spill/page_blob.h"

namespace furrballs {
namespace spill {
namespace {

namespace fs = std::filesystem;

class SpillStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name =
        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    dir_ = fs::path(::testing::TempDir()) / name;
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }

  std::unique_ptr<SpillStore> Open(std::optional<std::string>* manifest,
                                   uint64_t budget = 0,
                                   rocksdb::Env* env = nullptr) {
    SpillStoreOptions o;
    o.dir = dir_.string();
    o.node_count = 2;
    o.disk_budget_bytes = budget;
    o.env = env;
    absl::StatusOr<std::unique_ptr<SpillStore>> s =
        SpillStore::Open(o, manifest);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  static std::string Blob(uint64_t page_id, size_t value_bytes) {
    PageBlobBuilder b(0, page_id, 0);
    const std::string v(value_bytes, static_cast<char>('a' + page_id % 26));
    v.copy(b.Add(HashPair{page_id, ~page_id}, page_id, 0,
                 static_cast<uint32_t>(v.size())),
           v.size());
    return b.Finish();
  }

  fs::path dir_;
};

// Opens a store in `dir` that must fail; returns the status.
absl::Status OpenFails(const fs::path& dir) {
  SpillStoreOptions o;
  o.dir = dir.string();
  std::optional<std::string> manifest;
  absl::StatusOr<std::unique_ptr<SpillStore>> s = SpillStore::Open(o, &manifest);
  EXPECT_FALSE(s.ok()) << "opened in " << dir;
  return s.ok() ? absl::OkStatus() : s.status();
}

// A store that cannot open says where and why, with the code of the cause
// (each of these used to be UNAVAILABLE, and the engine reported every one
// as INVALID_ARGUMENT).
TEST_F(SpillStoreTest, OpenFailuresNameThePathWithTheirOwnCode) {
  const fs::path file = dir_ / "a-file";
  std::ofstream(file) << "x";
  struct Case {
    fs::path dir;
    absl::StatusCode code;
    const char* why;
  };
  const Case cases[] = {
      {file, absl::StatusCode::kFailedPrecondition, "not a directory"},
      {file / "sub", absl::StatusCode::kFailedPrecondition, "not a directory"},
      {dir_ / "missing" / "sub", absl::StatusCode::kNotFound,
       "parent directory does not exist"},
  };
  for (const Case& c : cases) {
    const absl::Status s = OpenFails(c.dir);
    EXPECT_EQ(s.code(), c.code) << s;
    EXPECT_NE(s.message().find(c.dir.string()), std::string::npos) << s;
    EXPECT_NE(s.message().find(c.why), std::string::npos) << s;
  }
}

// Two stores on one directory: RocksDB's LOCK file. Held by another
// process (a second server on the same --data_dir), the error names that
// process; held by this one, it says so.
TEST_F(SpillStoreTest, ADirectoryInUseIsAFailedPreconditionThatSaysByWhom) {
  std::optional<std::string> manifest;
  {
    auto first = Open(&manifest);
    ASSERT_NE(first, nullptr);
    const absl::Status s = OpenFails(dir_);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("in use by this process"), std::string::npos)
        << s;
    EXPECT_NE(s.message().find(dir_.string()), std::string::npos) << s;
    ASSERT_TRUE(first->Put(0, 1, Blob(1, 100)).ok())
        << "the failed open disturbed the store that holds the directory";
  }
  // Another process takes the lock as RocksDB does (an fcntl write lock on
  // LOCK) and holds it until `release` is closed. The child of this
  // multi-threaded process only makes async-signal-safe calls.
  int ready[2], release[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(release), 0);
  const std::string lock_path = (dir_ / "LOCK").string();
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    close(release[1]);
    const int fd = open(lock_path.c_str(), O_RDWR | O_CREAT, 0644);
    struct flock lock = {};
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    const bool locked = fd >= 0 && fcntl(fd, F_SETLK, &lock) == 0;
    char c = locked ? '1' : '0';
    if (write(ready[1], &c, 1) != 1) _exit(1);
    while (read(release[0], &c, 1) > 0) {
    }
    _exit(0);
  }
  close(ready[1]);
  close(release[0]);
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  close(ready[0]);
  ASSERT_EQ(c, '1') << "the child could not lock " << lock_path;
  const absl::Status s = OpenFails(dir_);
  close(release[1]);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find(absl::StrCat("in use by process ", child)),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find(dir_.string()), std::string::npos) << s;
  EXPECT_NE(Open(&manifest), nullptr) << "free again once the process ended";
}

TEST_F(SpillStoreTest, PutGetDeleteByNode) {
  std::optional<std::string> manifest;
  auto store = Open(&manifest);
  ASSERT_NE(store, nullptr);
  EXPECT_FALSE(manifest.has_value()) << "a new directory is cold";
  const uint64_t a = store->NewPageId(), b = store->NewPageId();
  EXPECT_LT(a, b);
  ASSERT_TRUE(store->Put(0, a, Blob(a, 100)).ok());
  ASSERT_TRUE(store->Put(1, b, Blob(b, 200)).ok());
  absl::StatusOr<std::string> got = store->Get(0, a);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, Blob(a, 100));
  EXPECT_EQ(store->Get(1, a).status().code(), absl::StatusCode::kNotFound)
      << "column families keep nodes apart";
  EXPECT_EQ(store->stats().pages, 2u);
  ASSERT_TRUE(store->Delete(0, a).ok());
  EXPECT_EQ(store->Get(0, a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->stats().pages, 1u);
  EXPECT_EQ(store->Put(2, 9, "x").code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(SpillStoreTest, BudgetRemovesOldestPagesFirstAcrossNodes) {
  std::optional<std::string> manifest;
  const size_t blob = Blob(1, 1000).size();
  auto store = Open(&manifest, /*budget=*/4 * blob);
  ASSERT_NE(store, nullptr);
  std::vector<uint64_t> ids;
  std::vector<std::pair<int, uint64_t>> removed;
  for (int i = 0; i < 10; ++i) {
    const uint64_t id = store->NewPageId();
    ids.push_back(id);
    ASSERT_TRUE(store->Put(i % 2, id, Blob(id, 1000), &removed).ok());
  }
  ASSERT_EQ(removed.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(removed[i], std::make_pair(i % 2, ids[i])) << i;
    EXPECT_EQ(store->Get(i % 2, ids[i]).status().code(),
              absl::StatusCode::kNotFound);
  }
  for (int i = 6; i < 10; ++i) EXPECT_TRUE(store->Get(i % 2, ids[i]).ok());
  const SpillStoreStats s = store->stats();
  EXPECT_LE(s.bytes, 4 * blob);
  EXPECT_EQ(s.pages_removed_for_budget, 6u);
  // Each node learns of its own removed pages, oldest first, once, whichever
  // node's Put removed them.
  EXPECT_EQ(store->TakeRemovedPages(0),
            (std::vector<uint64_t>{ids[0], ids[2], ids[4]}));
  EXPECT_EQ(store->TakeRemovedPages(1),
            (std::vector<uint64_t>{ids[1], ids[3], ids[5]}));
  EXPECT_TRUE(store->TakeRemovedPages(0).empty());
  EXPECT_TRUE(store->TakeRemovedPages(7).empty());  // no such node
}

TEST_F(SpillStoreTest, GracefulCloseReopensWarmOnce) {
  std::optional<std::string> manifest;
  uint64_t id = 0;
  {
    auto store = Open(&manifest);
    id = store->NewPageId();
    ASSERT_TRUE(store->Put(1, id, Blob(id, 5000)).ok());
    ASSERT_TRUE(store->Close("engine state").ok());
  }
  {
    auto store = Open(&manifest);
    ASSERT_TRUE(manifest.has_value());
    EXPECT_EQ(*manifest, "engine state");
    absl::StatusOr<std::string> got = store->Get(1, id);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, Blob(id, 5000));
    EXPECT_EQ(store->stats().pages, 1u);
    EXPECT_GT(store->NewPageId(), id) << "ids are never reused";
    // Dropped without Close: as after a crash.
  }
  auto store = Open(&manifest);
  EXPECT_FALSE(manifest.has_value()) << "the manifest is consumed on open";
  EXPECT_EQ(store->Get(1, id).status().code(), absl::StatusCode::kNotFound)
      << "a crashed store is cold";
  EXPECT_EQ(store->stats().pages, 0u);
}

// The disk fails (ENOSPC, then EIO) while closing: Close reports it and
// counts it; once the disk is back the next write resumes (or reopens) the
// store, and a later Close succeeds and the reopen is warm. A page that was
// only in the memtable when the disk failed may be lost (pages are written
// without the WAL), so it reads back as itself or not at all.
TEST_F(SpillStoreTest, WriteFaultsAreReportedAndRecovered) {
  auto faults = std::make_shared<FaultInjectionFs>();
  std::unique_ptr<rocksdb::Env> env = NewFaultInjectionEnv(faults);
  std::optional<std::string> manifest;
  std::vector<uint64_t> ids;
  {
    auto store = Open(&manifest, 0, env.get());
    ASSERT_NE(store, nullptr);
    for (auto fault : {FaultInjectionFs::Fault::kNoSpace,
                       FaultInjectionFs::Fault::kIoError}) {
      ids.push_back(store->NewPageId());
      ASSERT_TRUE(store->Put(0, ids.back(), Blob(ids.back(), 3000)).ok());
      faults->SetWriteFault(fault);
      const uint64_t errors = store->stats().write_errors;
      EXPECT_FALSE(store->Close("m").ok());
      EXPECT_GT(store->stats().write_errors, errors);
      faults->SetWriteFault(FaultInjectionFs::Fault::kNone);
      const uint64_t id = store->NewPageId();
      const absl::Status put = store->Put(1, id, Blob(id, 3000));
      ASSERT_TRUE(put.ok()) << "recovers when the disk does: " << put;
      ASSERT_TRUE(store->Get(1, id).ok());
      ids.push_back(id);
    }
    EXPECT_GT(faults->injected(), 0u);
    const absl::Status closed = store->Close("m");
    ASSERT_TRUE(closed.ok()) << closed;
  }
  auto store = Open(&manifest, 0, env.get());
  ASSERT_TRUE(manifest.has_value());
  for (size_t i = 0; i < ids.size(); ++i) {
    const int node = i % 2 == 0 ? 0 : 1;
    const absl::StatusOr<std::string> got = store->Get(node, ids[i]);
    if (i == ids.size() - 1) {
      ASSERT_TRUE(got.ok()) << got.status();
    }
    if (got.ok()) {
      EXPECT_EQ(*got, Blob(ids[i], 3000));
    } else {
      EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
    }
  }
}

TEST_F(SpillStoreTest, ReadFaultIsAnErrorNotData) {
  auto faults = std::make_shared<FaultInjectionFs>();
  std::unique_ptr<rocksdb::Env> env = NewFaultInjectionEnv(faults);
  std::optional<std::string> manifest;
  uint64_t id = 0;
  {
    auto store = Open(&manifest, 0, env.get());
    id = store->NewPageId();
    ASSERT_TRUE(store->Put(0, id, Blob(id, 3000)).ok());
    ASSERT_TRUE(store->Close("m").ok());
  }
  auto store = Open(&manifest, 0, env.get());
  faults->SetReadFault(true);
  const absl::StatusOr<std::string> bad = store->Get(0, id);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store->stats().read_errors, 1u);
  faults->SetReadFault(false);
  EXPECT_TRUE(store->Get(0, id).ok()) << "recovers when the disk does";
}

// Bytes flipped in the files on disk (the page's blob file, or the SSTs):
// the store either refuses the read, starts over cold, or returns bytes
// that fail the PageBlob checksum; never a blob that decodes to other data.
class SpillStoreCorruptionTest
    : public SpillStoreTest,
      public ::testing::WithParamInterface<const char*> {};

TEST_P(SpillStoreCorruptionTest, NeverYieldsADecodableWrongBlob) {
  std::optional<std::string> manifest;
  uint64_t id = 0;
  const std::string original = Blob(7, 20000);
  {
    auto store = Open(&manifest);
    id = store->NewPageId();
    ASSERT_TRUE(store->Put(0, id, original).ok());
    ASSERT_TRUE(store->Close("m").ok());
  }
  int corrupted = 0;
  for (const auto& entry : fs::directory_iterator(dir_)) {
    if (entry.path().extension().string() != GetParam()) continue;
    std::fstream f(entry.path(), std::ios::in | std::ios::out |
                                     std::ios::binary);
    const auto size = fs::file_size(entry.path());
    for (uintmax_t at = size / 4; at < size * 3 / 4; at += 997) {
      f.seekp(static_cast<std::streamoff>(at));
      f.put('\x5a');
    }
    ++corrupted;
  }
  ASSERT_GT(corrupted, 0) << "no " << GetParam() << " file to corrupt";
  auto store = Open(&manifest);
  ASSERT_NE(store, nullptr) << "a corrupted store must still open";
  const absl::StatusOr<std::string> got = store->Get(0, id);
  if (got.ok()) {
    const absl::StatusOr<PageBlobView> v = DecodePageBlob(*got);
    EXPECT_TRUE(!v.ok() || *got == original)
        << "a corrupted page decoded as something else";
  }
  std::printf("%s corrupted: open %s, read %s\n", GetParam(),
              store->stats().corrupt_on_open ? "started cold" : "ok",
              got.ok() ? "returned bytes" : got.status().ToString().c_str());
}

INSTANTIATE_TEST_SUITE_P(Files, SpillStoreCorruptionTest,
                         ::testing::Values(".blob", ".sst"),
                         [](const auto& info) {
                           return std::string(info.param + 1);
                         });

}  // namespace
}  // namespace spill
}  // namespace furrballs
