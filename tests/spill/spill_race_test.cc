// One interleaving of the spill tier's no-resurrection protocol, forced with
// the engine's pause points (furrball_testing.h): an ARC victim is erased
// from the key table under ARC's lock and indexed in the spill tier just
// after it, without its key lock, so a writer of that key can look in both
// places between the two steps and find the key in neither.
//
//   worker   evicts K (value v1): erases it ... [paused] ... indexes v1
//   writer   Set(K, v2): sees K nowhere, is about to insert  [paused]
//   worker   resumes: indexes v1 (the writer's insert waits for that)
//   writer   inserts v2 (acknowledged)
//   test     Delete(K) (acknowledged), then Get(K)
//
// The Get must miss. If the insert left v1's index entry behind, the Delete
// (which found K in memory) would not look at the index, and the Get would
// reload v1 from the spill tier: a deleted key, and an overwritten value,
// back from the dead.
//
// A second test holds a ghost hit inside its disk read and shows that the
// node's other keys are served meanwhile (issue 7: "the reload must not
// block other keys of the node for the duration of the RocksDB read").
//
// A third forces two Gets of one spilled key to overlap so that the second
// looks in the index only after the first's reload took the entry (issue
// 15: with --dispatch=nodejob such a pair answered one miss and one hit).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/furrball/clock.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"
#include "tests/spill/spill_test_util.h"

namespace furrballs {
namespace {

constexpr size_t kValueBytes = 1000;

std::string Value(const std::string& tag) {
  std::string v = tag + ":";
  while (v.size() < kValueBytes) v += char('a' + v.size() % 26);
  return v;
}

// The pause points' state; the hooks are plain functions, so it is global.
struct Rendezvous {
  std::atomic<uint64_t> victim_h1{0};
  std::atomic<uint64_t> victim_h2{0};
  std::atomic<bool> victim_paused{false};
  std::atomic<bool> writer_at_insert{false};
  std::atomic<bool> release{false};
};
Rendezvous* g_rv = nullptr;

bool IsVictim(const HashPair& h) {
  return h.h1 == g_rv->victim_h1.load() && h.h2 == g_rv->victim_h2.load();
}

void OnVictimErased(const HashPair& h) {
  if (!IsVictim(h) || g_rv->victim_paused.exchange(true)) return;
  while (!g_rv->release.load()) std::this_thread::yield();
}

void OnBeforeInsert(const HashPair& h) {
  if (IsVictim(h) && g_rv->victim_paused.load()) g_rv->writer_at_insert = true;
}

using spill_testing::Await;

TEST(SpillRaceTest, WriterBetweenVictimEraseAndIndexCannotResurrectIt) {
  Rendezvous rv;
  g_rv = &rv;
  EngineTestHooks hooks;
  hooks.victim_erased = &OnVictimErased;
  hooks.before_insert = &OnBeforeInsert;

  ManualClock clock;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(
      spill_testing::SmallSpillCache(spill_testing::FreshTestDir(), &clock));
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;

  const std::string key = "race-victim";
  const HashPair h = ball.Hash(key);
  rv.victim_h1 = h.h1;
  rv.victim_h2 = h.h2;
  ASSERT_EQ(ball.Set(key, Value("v1")).error, Error::kOk);
  SetEngineTestHooksForTesting(&hooks);

  // A filler writes new keys (never reading K, which becomes ARC's coldest)
  // until the worker evicts K and pauses, then stops, leaving the room the
  // worker keeps free to the writer (pages_empty: free pages over both
  // nodes). It runs on its own thread: once the worker is paused, holding
  // the reclaim mutex, the filler's last Set may block.
  std::atomic<bool> stop{false};
  std::thread filler([&] {
    for (int i = 0; !stop.load() && !rv.victim_paused.load(); ++i) {
      ball.Set("fill-" + std::to_string(i), Value("fill"));
      // Let the worker keep its free pages, so that writers never reclaim
      // in line (which spills or evicts whole pages, not ARC victims).
      while (i % 16 == 15 && !stop.load() && !rv.victim_paused.load() &&
             spill_testing::SpillTotals(ball).pages_empty < 4) {
        std::this_thread::yield();
      }
    }
  });
  const bool paused = Await(rv.victim_paused);
  std::fprintf(stderr, "victim paused: %d\n", paused);

  std::atomic<bool> written{false};
  SetResult second;
  std::thread writer([&] {
    if (!paused) return;
    second = ball.Set(key, Value("v2"));
    written = true;
  });
  const bool at_insert = paused && Await(rv.writer_at_insert);
  std::fprintf(stderr, "writer at insert: %d\n", at_insert);
  stop = true;
  rv.release = true;  // whatever happened, never leave the worker paused
  writer.join();
  filler.join();
  SetEngineTestHooksForTesting(nullptr);
  ASSERT_TRUE(paused) << "the worker never evicted the key";
  ASSERT_TRUE(at_insert) << "the writer did not reach its insert while the "
                            "victim was between erase and index";
  ASSERT_TRUE(written);
  ASSERT_EQ(second.error, Error::kOk);

  const DeleteResult del = ball.Delete(key);
  ASSERT_EQ(del.error, Error::kOk);
  EXPECT_TRUE(del.deleted);
  std::string v;
  const GetResult g = ball.Get(key, &v);
  EXPECT_FALSE(g.found) << "the deleted key came back with '"
                        << v.substr(0, 8) << "'"
                        << (g.reloaded ? " from the spill tier" : "");
  // Stop the engine's threads before the hooks' state goes: a worker that
  // read the hooks before they were removed may still be calling them.
  opened->reset();
  g_rv = nullptr;
}

// ---- A victim being copied to the spill tier holds no ARC lock ----

std::atomic<bool> g_first_victim_paused{false};
std::atomic<bool> g_first_victim_release{false};
std::atomic<uint64_t> g_first_victim_h1{0};
std::atomic<uint64_t> g_first_victim_h2{0};

void PauseFirstVictim(const HashPair& h) {
  if (g_first_victim_paused.load()) return;
  g_first_victim_h1 = h.h1;
  g_first_victim_h2 = h.h2;
  g_first_victim_paused = true;
  while (!g_first_victim_release.load()) std::this_thread::yield();
}

// Copying a victim into the spill batch waits for the batch mutex and
// allocates, so it must not run inside ARC's critical section (a SpinLock:
// issue 15 item 6). The evictor is held at the copy (victim_erased) and a
// Delete on its node, which takes that node's ARC lock, must finish.
TEST(SpillRaceTest, AVictimBeingCopiedToTheSpillTierHoldsNoArcLock) {
  ManualClock clock;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(
      spill_testing::SmallSpillCache(spill_testing::FreshTestDir(), &clock));
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  EngineTestHooks hooks;
  hooks.victim_erased = &PauseFirstVictim;
  SetEngineTestHooksForTesting(&hooks);

  std::atomic<bool> stop{false};
  std::thread filler([&] {
    for (int i = 0; !stop.load() && !g_first_victim_paused.load(); ++i) {
      ball.Set("fill-" + std::to_string(i), Value("fill"));
      while (i % 16 == 15 && !stop.load() && !g_first_victim_paused.load() &&
             spill_testing::SpillTotals(ball).pages_empty < 4) {
        std::this_thread::yield();
      }
    }
  });
  const bool paused = Await(g_first_victim_paused);

  std::atomic<bool> deleted{false};
  std::thread deleter([&] {
    if (!paused) return;
    const int node =
        ball.OwnerOf(HashPair{g_first_victim_h1.load(), g_first_victim_h2.load()});
    for (int i = 0;; ++i) {
      const std::string k = "absent-" + std::to_string(i);
      if (ball.OwnerOf(ball.Hash(k)) != node) continue;
      ball.Delete(k);
      break;
    }
    deleted = true;
  });
  const bool done = paused && Await(deleted);
  stop = true;
  g_first_victim_release = true;  // never leave the evictor held
  deleter.join();
  filler.join();
  SetEngineTestHooksForTesting(nullptr);
  ASSERT_TRUE(paused) << "no victim was ever copied to the spill tier";
  EXPECT_TRUE(done) << "a Delete on the victim's node waited for the copy";
}

// ---- A reload in its disk read holds up no other key of its node ----

TEST(SpillRaceTest, AReloadInItsDiskReadHoldsUpNoOtherKeyOfItsNode) {
  ManualClock clock;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(
      spill_testing::SmallSpillCache(spill_testing::FreshTestDir(), &clock));
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  constexpr int kKeys = 6000;  // about 3x the memory
  auto key = [](int i) { return "reload-" + std::to_string(i); };
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_EQ(ball.Set(key(i), Value(key(i))).error, Error::kOk);
    if (i % 16 == 15) {
      spill_testing::WaitFor("the workers never freed pages", [&] {
        return spill_testing::SpillTotals(ball).pages_empty >= 4;
      });
    }
  }
  ASSERT_GT(spill_testing::SpillTotals(ball).spill_keys_indexed, 1000u);

  spill_testing::HeldPause hold;

  // The reader reads keys from the oldest on until one is a ghost hit; its
  // reload pauses in the hook, before the RocksDB read.
  std::atomic<int> paused_key{-1};
  std::string paused_value;
  GetResult paused_get;
  std::thread reader([&] {
    std::string v;
    for (int i = 0; i < kKeys; ++i) {
      const GetResult g = ball.Get(key(i), &v);
      if (g.reloaded) {
        paused_key = i;
        paused_get = g;
        paused_value = v;
        return;
      }
    }
  });
  const bool paused = hold.AwaitHeld();

  // Meanwhile, on the same node: new writes, reads of them, and another
  // ghost hit (the hook pauses only the first), on a thread of their own so
  // that a block shows as a bounded wait, not a hung test.
  std::atomic<bool> others_done{false};
  std::atomic<int> others_ok{0};
  std::atomic<int> others_reloaded{0};
  std::thread others([&] {
    if (!paused) return;
    const HashPair held = hold.key();
    const int node = ball.OwnerOf(held);
    std::string v;
    int written = 0;
    for (int i = 0; written < 20; ++i) {
      const std::string k = "other-" + std::to_string(i);
      if (ball.OwnerOf(ball.Hash(k)) != node) continue;
      ++written;
      if (ball.Set(k, Value(k)).error == Error::kOk &&
          ball.Get(k, &v).found && v == Value(k)) {
        ++others_ok;
      }
    }
    // Another spilled key of the node, read back from disk while the first
    // reload is still held.
    for (int i = kKeys - 1; i >= 0 && others_reloaded.load() == 0; --i) {
      const HashPair h = ball.Hash(key(i));
      if (ball.OwnerOf(h) != node || (h.h1 == held.h1 && h.h2 == held.h2)) {
        continue;
      }
      const GetResult g = ball.Get(key(i), &v);
      if (g.reloaded && v == Value(key(i))) ++others_reloaded;
    }
    others_done = true;
  });
  const bool done_while_held = paused && Await(others_done);
  hold.Release();  // whatever happened, let the reload go on
  others.join();
  reader.join();

  ASSERT_TRUE(paused) << "no Get needed a reload";
  EXPECT_TRUE(done_while_held)
      << "other keys of the node waited for the held reload";
  EXPECT_EQ(others_ok.load(), 20);
  EXPECT_EQ(others_reloaded.load(), 1)
      << "no second ghost hit was served while the first was held";
  ASSERT_GE(paused_key.load(), 0);
  EXPECT_TRUE(paused_get.found);
  EXPECT_EQ(paused_value, Value(key(paused_key.load())));
}

// ---- A Get of a key that another Get is reloading ----

// Two Gets of a key whose only copy is on disk:
//   B   misses in memory ... [paused before its index lookup]
//   A   Get: reloads the key (inserts it in memory, then takes its entry)
//   B   resumes: the index has no entry any more
// B must find the key A reloaded, not miss. B is a direct-mode Get, or the
// GetFromMemory a NodeJob worker runs (A is then the reload thread's Get).
class SecondGetOfAReloadedKeyTest : public ::testing::TestWithParam<bool> {};

TEST_P(SecondGetOfAReloadedKeyTest, FindsTheKeyTheFirstReloaded) {
  const bool from_memory = GetParam();
  ManualClock clock;
  FurrBallOptions o =
      spill_testing::SmallSpillCache(spill_testing::FreshTestDir(), &clock);
  o.node_count = 1;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  auto key = [](int i) { return "twice-" + std::to_string(i); };
  constexpr int kKeys = 3000;  // about 3x the memory
  for (int i = 0; i < kKeys; ++i) {
    ASSERT_EQ(ball.Set(key(i), Value(key(i))).error, Error::kOk);
    if (i % 16 == 15) {
      spill_testing::WaitFor("the worker never freed pages", [&] {
        return spill_testing::SpillTotals(ball).pages_empty >= 2;
      });
    }
  }
  int spilled = -1;
  std::string v;
  for (int i = 0; i < kKeys && spilled < 0; ++i) {
    const std::string ki = key(i);
    if (ball.GetFromMemory(ball.Ref(ki), &v).on_disk) spilled = i;
  }
  ASSERT_GE(spilled, 0) << "no key was on disk";
  const std::string k = key(spilled);

  spill_testing::HeldPause hold(
      spill_testing::HeldPause::Point::kGetMissedMemory);
  GetResult second;
  std::string second_value;
  std::thread b([&] {
    second = from_memory ? ball.GetFromMemory(ball.Ref(k), &second_value)
                         : ball.Get(k, &second_value);
  });
  const bool paused = hold.AwaitHeld();
  std::string first_value;
  GetResult first;
  if (paused) first = ball.Get(k, &first_value);
  hold.Release();
  b.join();

  ASSERT_TRUE(paused) << "the Get never missed in memory";
  ASSERT_TRUE(first.found);
  EXPECT_TRUE(first.reloaded);
  EXPECT_EQ(first_value, Value(k));
  EXPECT_TRUE(second.found)
      << "the second Get missed the key the first was reloading"
      << (second.on_disk ? " (sent to disk)" : "");
  EXPECT_EQ(second_value, Value(k));
}

INSTANTIATE_TEST_SUITE_P(Mode, SecondGetOfAReloadedKeyTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "NodeJobWorkerFromMemory"
                                             : "DirectGet";
                         });

}  // namespace
}  // namespace furrballs
