// The spill tier's disk failing under live traffic, through FurrBall: a cache
// of 16 pages per node over a real RocksDB directory on a fault-injecting
// file system (engine/spill/fault_injection_fs.h), driven by writer and
// reader threads while the disk runs healthy, then fails writes (EIO, then
// ENOSPC), fails reads, stalls its syncs, and finally recovers.
//
// What must hold in every phase (issue 7, docs/spill.md "Errors"):
//   - every Set is acknowledged: the cache keeps serving from memory;
//   - every Get returns a miss or the key's own value, intact, no older than
//     the last write acknowledged before the Get began;
//   - a failure shows up in the spill_errors statistic;
//   - once the disk is healthy again, pages are written and read back.
//
// Phases are counted in operations, never timed; the workers are waited for
// by polling statistics with a generous bound.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/numbers.h>
#include <gtest/gtest.h>
#include <rocksdb/env.h>

#include "engine/furrball/clock.h"
#include "engine/furrball/furrball.h"
#include "engine/spill/fault_injection_fs.h"
#include "tests/spill/spill_test_util.h"

namespace furrballs {
namespace {

namespace fs = std::filesystem;
using spill::FaultInjectionFs;
using spill_testing::SpillTotals;
using spill_testing::WaitFor;

constexpr size_t kValueBytes = 1000;
constexpr int kKeys = 6000;  // about 3x the memory of SmallSpillCache
constexpr int kWriters = 2;
constexpr int kReaders = 2;

std::string Key(int i) { return "fault-key" + std::to_string(i); }

// "v<i>.<generation>:" then filler that depends on both, so a value of
// another key or generation, or a torn one, never compares equal.
std::string Value(int i, int generation) {
  std::string v = "v" + std::to_string(i) + "." + std::to_string(generation) +
                  ":";
  while (v.size() < kValueBytes) {
    v += char('a' + (v.size() * 7 + i * 3 + generation) % 26);
  }
  return v;
}

// The generation a value of key i claims, or -1 if it is not one of i's.
int GenerationOf(int i, const std::string& v) {
  const std::string prefix = "v" + std::to_string(i) + ".";
  if (v.compare(0, prefix.size(), prefix) != 0) return -1;
  const size_t colon = v.find(':', prefix.size());
  int g = -1;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(v.substr(prefix.size(), colon - prefix.size()), &g)) {
    return -1;
  }
  return g;
}

// Writer w owns the keys i with i % kWriters == w and is the only one to
// write them, so acked[i] (the last acknowledged generation) is exact.
class Traffic {
 public:
  explicit Traffic(FurrBall* ball) : ball_(ball), acked_(kKeys) {
    for (auto& a : acked_) a.store(0);
  }

  // Runs `ops` operations on every writer and reader thread, then returns.
  void Run(int ops) {
    std::vector<std::thread> threads;
    for (int w = 0; w < kWriters; ++w) {
      threads.emplace_back([this, w, ops] { WriterLoop(w, ops); });
    }
    for (int r = 0; r < kReaders; ++r) {
      threads.emplace_back([this, r, ops] { ReaderLoop(r, ops); });
    }
    for (std::thread& t : threads) t.join();
  }

  // Gets every key once from this thread: the number found. Every value
  // must be the last acknowledged one (no writer runs).
  int CheckAll() {
    std::string v;
    int found = 0;
    for (int i = 0; i < kKeys; ++i) {
      if (!ball_->Get(Key(i), &v).found) continue;
      ++found;
      const int g = acked_[i].load();
      if (v != Value(i, g)) Fail(i, "not its last acknowledged value", v);
    }
    return found;
  }

  uint64_t failed_sets() const { return failed_sets_.load(); }
  uint64_t bad_reads() const { return bad_reads_.load(); }
  uint64_t hits() const { return hits_.load(); }
  std::string first_failure() {
    std::lock_guard<std::mutex> l(mu_);
    return first_failure_;
  }

 private:
  void WriterLoop(int w, int ops) {
    std::mt19937_64 rng(next_seed_.fetch_add(1) * 7919 + w);
    std::uniform_int_distribution<int> pick(0, kKeys / kWriters - 1);
    for (int n = 0; n < ops; ++n) {
      const int i = pick(rng) * kWriters + w;
      const int g = acked_[i].load() + 1;
      const SetResult r = ball_->Set(Key(i), Value(i, g));
      if (r.error != Error::kOk) {
        failed_sets_.fetch_add(1);
        Fail(i, "Set failed with " + std::string(ErrorName(r.error)), "");
        continue;
      }
      acked_[i].store(g);
    }
  }

  void ReaderLoop(int r, int ops) {
    std::mt19937_64 rng(next_seed_.fetch_add(1) * 104729 + r);
    std::uniform_int_distribution<int> pick(0, kKeys - 1);
    std::string v;
    for (int n = 0; n < ops; ++n) {
      const int i = pick(rng);
      const int floor = acked_[i].load();
      if (!ball_->Get(Key(i), &v).found) continue;
      hits_.fetch_add(1);
      const int g = GenerationOf(i, v);
      if (g < 0 || v != Value(i, g)) {
        Fail(i, "foreign or torn value", v);
      } else if (g < floor) {
        Fail(i, "older than the value acknowledged before the Get", v);
      }
    }
  }

  void Fail(int i, const std::string& what, const std::string& v) {
    bad_reads_.fetch_add(1);
    std::lock_guard<std::mutex> l(mu_);
    if (first_failure_.empty()) {
      first_failure_ = Key(i) + ": " + what + " '" + v.substr(0, 24) + "'";
    }
  }

  FurrBall* const ball_;
  std::vector<std::atomic<int>> acked_;
  std::atomic<uint64_t> next_seed_{1};
  std::atomic<uint64_t> failed_sets_{0};
  std::atomic<uint64_t> bad_reads_{0};
  std::atomic<uint64_t> hits_{0};
  std::mutex mu_;
  std::string first_failure_;
};

class SpillFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = spill_testing::FreshTestDir();
    fault_fs_ = std::make_shared<FaultInjectionFs>();
    env_ = spill::NewFaultInjectionEnv(fault_fs_);
  }

  FurrBallOptions Options() {
    FurrBallOptions o = spill_testing::SmallSpillCache(dir_, &clock_);
    o.spill_env = env_.get();
    return o;
  }

  ManualClock clock_;
  fs::path dir_;
  std::shared_ptr<FaultInjectionFs> fault_fs_;
  std::unique_ptr<rocksdb::Env> env_;
};

TEST_F(SpillFaultTest, DiskFailuresUnderLiveTrafficKeepTheCacheServing) {
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(Options());
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  Traffic traffic(&ball);
  constexpr int kOps = 6000;  // per thread and phase

  // Healthy: fill past memory, so that pages go to disk and come back.
  traffic.Run(kOps);
  const NodeStatsSnapshot healthy = SpillTotals(ball);
  EXPECT_GT(healthy.spill_pages_written, 0u);
  EXPECT_EQ(healthy.spill_errors, 0u);

  // Writes fail (EIO, then ENOSPC): the spill tier cannot take pages, the
  // cache evicts instead and keeps acknowledging every Set.
  for (FaultInjectionFs::Fault fault :
       {FaultInjectionFs::Fault::kIoError, FaultInjectionFs::Fault::kNoSpace}) {
    const uint64_t errors_before = SpillTotals(ball).spill_errors;
    fault_fs_->SetWriteFault(fault);
    traffic.Run(kOps);
    // RocksDB learns of a failed write when its memtable is flushed; more
    // pages keep arriving until the store reports it.
    WaitFor("no spill error was counted under a failing disk", [&] {
      return SpillTotals(ball).spill_errors > errors_before;
    });
    traffic.Run(kOps / 4);
    fault_fs_->SetWriteFault(FaultInjectionFs::Fault::kNone);
  }

  // Reads fail: spilled keys miss (counted), resident ones are served.
  {
    const uint64_t errors_before = SpillTotals(ball).spill_errors;
    fault_fs_->SetReadFault(true);
    traffic.Run(kOps);
    fault_fs_->SetReadFault(false);
    const NodeStatsSnapshot s = SpillTotals(ball);
    std::printf("read fault: spill errors %llu -> %llu\n",
                (unsigned long long)errors_before,
                (unsigned long long)s.spill_errors);
  }

  // Syncs stall: traffic goes on, and the stalled syncs really happened.
  fault_fs_->SetSyncDelay(std::chrono::milliseconds(20));
  traffic.Run(kOps);
  fault_fs_->SetSyncDelay(std::chrono::microseconds(0));
  EXPECT_GT(fault_fs_->delayed_syncs(), 0u) << "no sync was slowed down";

  // The disk is healthy again: new pages are written and read back.
  const NodeStatsSnapshot before_recovery = SpillTotals(ball);
  traffic.Run(kOps);
  WaitFor("no page was written after the disk recovered", [&] {
    return SpillTotals(ball).spill_pages_written > before_recovery.spill_pages_written;
  });
  const int found = traffic.CheckAll();
  const NodeStatsSnapshot end = SpillTotals(ball);
  std::printf(
      "sets failed %llu, bad reads %llu, hits %llu; spill pages %llu, "
      "errors %llu, reloads %llu (after recovery +%llu pages, +%llu reloads); "
      "injected faults %llu, slowed syncs %llu; found at the end %d of %d\n",
      (unsigned long long)traffic.failed_sets(),
      (unsigned long long)traffic.bad_reads(),
      (unsigned long long)traffic.hits(),
      (unsigned long long)end.spill_pages_written,
      (unsigned long long)end.spill_errors,
      (unsigned long long)end.spill_reloads,
      (unsigned long long)(end.spill_pages_written -
                           before_recovery.spill_pages_written),
      (unsigned long long)(end.spill_reloads - before_recovery.spill_reloads),
      (unsigned long long)fault_fs_->injected(),
      (unsigned long long)fault_fs_->delayed_syncs(), found, kKeys);
  EXPECT_EQ(traffic.failed_sets(), 0u) << traffic.first_failure();
  EXPECT_EQ(traffic.bad_reads(), 0u) << traffic.first_failure();
  EXPECT_GT(end.spill_reloads, before_recovery.spill_reloads)
      << "no page was read back after the disk recovered";
  // Memory alone holds fewer than 2,100 of these values; keys written after
  // the recovery come back from disk.
  EXPECT_GT(found, 2100) << "the recovered spill tier holds nothing";
}

}  // namespace
}  // namespace furrballs
