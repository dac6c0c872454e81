// tests/spill/spill_test_util.h: what the engine-level spill tests share: a
// small cache over a real RocksDB directory, the statistics they read summed
// over nodes, and a bounded wait for the node workers.
#ifndef FURRBALLS_TESTS_SPILL_SPILL_TEST_UTIL_H_
#define FURRBALLS_TESTS_SPILL_SPILL_TEST_UTIL_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/furrball/clock.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"

namespace furrballs {
namespace spill_testing {

// A directory named after the running test, under the test's temp dir.
inline std::filesystem::path TestDir() {
  std::string name =
      ::testing::UnitTest::GetInstance()->current_test_info()->name();
  for (char& c : name) {
    if (c == '/') c = '_';  // parameterized test names
  }
  return std::filesystem::path(::testing::TempDir()) / name;
}

inline std::filesystem::path FreshTestDir() {
  const std::filesystem::path dir = TestDir();
  std::filesystem::remove_all(dir);
  return dir;
}

// 2 simulated nodes of 16 pages of 64 KiB, the spill tier in `dir`, a worker
// pass every millisecond: a few thousand 1 KB values are several times the
// memory.
inline FurrBallOptions SmallSpillCache(const std::filesystem::path& dir,
                                       const Clock* clock) {
  FurrBallOptions o;
  o.node_count = 2;
  o.simulate_topology = true;
  // About 15 pages of 64 KiB per node once the key table (sized for
  // 1 KiB entries), the spill write buffers and the fixed structures have
  // their share (memory_plan.h).
  o.memory_budget_bytes = 3 << 20;
  o.expected_entry_bytes = 1024;
  o.page_size_bytes = 64 << 10;
  o.max_value_bytes = 16 << 10;
  o.maintenance_interval = std::chrono::milliseconds(1);
  o.clock = clock;
  o.spill_dir = dir.string();
  return o;
}

// The counters the spill tests read, summed over the nodes.
inline NodeStatsSnapshot SpillTotals(const FurrBall& ball) {
  NodeStatsSnapshot t;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    t.spill_pages_written += s.spill_pages_written;
    t.spill_keys_written += s.spill_keys_written;
    t.spill_reloads += s.spill_reloads;
    t.spill_ghost_hits += s.spill_ghost_hits;
    t.spill_errors += s.spill_errors;
    t.spill_keys_indexed += s.spill_keys_indexed;
    t.spill_disk_bytes += s.spill_disk_bytes;
    t.pages_empty += s.pages_empty;
    t.page_evictions += s.page_evictions;
    t.ttl_expirations += s.ttl_expirations;
    t.cold_migrations += s.cold_migrations;
    t.cold_pages_spilled += s.cold_pages_spilled;
    t.cold_fallbacks += s.cold_fallbacks;
  }
  return t;
}

// Polls `done` (yielding, never sleeping) and fails the test with `what`
// after a bound generous enough for a loaded machine.
template <typename Pred>
void WaitFor(const char* what, Pred done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done()) {
    ASSERT_LT(std::chrono::steady_clock::now(), deadline) << what;
    std::this_thread::yield();
  }
}

// Yields until `flag` is set; false if it is not within 20 s (a test that
// holds the engine at a pause point uses it to fail instead of hanging).
inline bool Await(const std::atomic<bool>& flag) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!flag.load()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// Holds the first engine thread that reaches a pause point after
// construction (furrball_testing.h) until Release(): by default a Get's
// spill reload just before its disk read (reload_read), or a Get that found
// no copy in memory just before it looks in the spill index
// (get_missed_memory). One at a time; the destructor releases it and removes
// the hook.
class HeldPause {
 public:
  enum class Point { kReloadRead, kGetMissedMemory, kVictimBatchWrite };

  explicit HeldPause(Point point = Point::kReloadRead) {
    current_ = this;
    switch (point) {
      case Point::kReloadRead:
        hooks_.reload_read = &OnPause;
        break;
      case Point::kGetMissedMemory:
        hooks_.get_missed_memory = &OnPause;
        break;
      case Point::kVictimBatchWrite:
        hooks_.victim_batch_write = &OnPageWrite;
        break;
    }
    SetEngineTestHooksForTesting(&hooks_);
  }
  ~HeldPause() {
    Release();
    SetEngineTestHooksForTesting(nullptr);
    current_ = nullptr;
  }
  HeldPause(const HeldPause&) = delete;
  HeldPause& operator=(const HeldPause&) = delete;

  // True once a thread is held (false after Await's bound).
  bool AwaitHeld() { return Await(held_); }
  void Release() { release_ = true; }
  // The key of the held operation (for kVictimBatchWrite, the page id in
  // h1).
  HashPair key() const { return HashPair{h1_.load(), h2_.load()}; }
  // The thread held at the pause point. REQUIRES: AwaitHeld() returned true.
  std::thread::id held_thread() const { return held_thread_; }

 private:
  static void OnPause(const HashPair& h) {
    HeldPause* self = current_;
    bool armed = true;
    if (!self->armed_.compare_exchange_strong(armed, false)) return;
    self->h1_ = h.h1;
    self->h2_ = h.h2;
    self->held_thread_ = std::this_thread::get_id();
    self->held_ = true;  // after held_thread_: AwaitHeld's load orders it
    while (!self->release_.load()) std::this_thread::yield();
  }
  static void OnPageWrite(uint64_t page_id) { OnPause(HashPair{page_id, 0}); }

  static inline HeldPause* current_ = nullptr;
  EngineTestHooks hooks_;
  std::atomic<bool> armed_{true};
  std::atomic<bool> held_{false};
  std::atomic<bool> release_{false};
  std::atomic<uint64_t> h1_{0};
  std::atomic<uint64_t> h2_{0};
  std::thread::id held_thread_;
};

}  // namespace spill_testing
}  // namespace furrballs

#endif  // FURRBALLS_TESTS_SPILL_SPILL_TEST_UTIL_H_
