// A key's write lock is held through a whole Set, which may block (wait for
// the reclaim mutex, yield while pages drain, write a page to RocksDB;
// issue 15 item 6). A writer waiting for that lock must sleep in the kernel,
// not spin on a core the holder may need. The holder is held inside the
// Set's insert with the engine's pause point (furrball_testing.h), and the
// waiter's scheduler state is read from /proc: 'S' (sleeping) once it
// parks; a spin lock keeps it 'R' for as long as the holder blocks.
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include <absl/strings/str_cat.h>
#include <gtest/gtest.h>

#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"
#include "tests/common/eventually.h"

namespace furrballs {
namespace {

// The pause point's state; hooks are plain functions, so it is global.
std::atomic<bool> g_armed{false};
std::atomic<bool> g_holder_paused{false};
std::atomic<bool> g_release{false};

void HoldFirstInsert(const HashPair&) {
  if (!g_armed.exchange(false)) return;
  g_holder_paused = true;
  while (!g_release.load()) std::this_thread::yield();
}

// The scheduler state letter of thread `tid` of this process ('R', 'S', ...).
char ThreadState(pid_t tid) {
  std::ifstream stat(absl::StrCat("/proc/self/task/", tid, "/stat"));
  std::string line;
  std::getline(stat, line);
  // "tid (comm) S ...": comm may hold spaces, so look after the last ')'.
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size()
             ? '?'
             : line[close + 2];
}

TEST(KeyLockTest, AWriterWaitingForABlockedKeySleeps) {
  FurrBallOptions o;
  o.memory_budget_bytes = size_t{8} << 20;
  o.page_size_bytes = size_t{64} << 10;
  o.max_value_bytes = size_t{32} << 10;
  o.node_count = 1;
  o.simulate_topology = true;
  absl::StatusOr<std::unique_ptr<FurrBall>> ball = FurrBall::Open(o);
  ASSERT_TRUE(ball.ok()) << ball.status();
  EngineTestHooks hooks;
  hooks.before_insert = &HoldFirstInsert;
  SetEngineTestHooksForTesting(&hooks);
  g_armed = true;

  std::thread holder([&] { (*ball)->Set("k", "first", WriteOptions{}); });
  ASSERT_TRUE(test_support::Eventually([] { return g_holder_paused.load(); }));

  std::atomic<pid_t> waiter_tid{0};
  std::thread waiter([&] {
    waiter_tid = static_cast<pid_t>(syscall(SYS_gettid));
    (*ball)->Set("k", "second", WriteOptions{});
  });
  ASSERT_TRUE(test_support::Eventually([&] { return waiter_tid != 0; }));
  // Bounded: with a spin lock the waiter never sleeps, and the test fails
  // after the wait instead of hanging (the release below still runs).
  char state = '?';
  const bool slept = test_support::Eventually(
      [&] { return (state = ThreadState(waiter_tid)) == 'S'; },
      std::chrono::seconds(5));
  g_release = true;
  holder.join();
  waiter.join();
  SetEngineTestHooksForTesting(nullptr);
  EXPECT_TRUE(slept) << "the waiting writer stayed in state " << state;

  std::string value;
  ASSERT_TRUE((*ball)->Get("k", &value).found);
  EXPECT_EQ(value, "second");  // the waiter wrote after the holder
}

}  // namespace
}  // namespace furrballs
