// The dispatcher over a cache with the spill tier (service/dispatcher.h,
// "Disk reads"): a node's worker never waits for a disk read, and in direct
// mode neither does the calling gRPC thread, nor for a batch write.
// A Get whose key is only on disk is finished by a reload thread, so while
// that read is held (the engine's reload_read pause point) the node's queue
// keeps serving other keys, and the held Get still gets its value.
#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/clock.h"
#include "engine/furrball/furrball.h"
#include "engine/furrball/furrball_testing.h"
#include "service/dispatcher.h"
#include "tests/spill/spill_test_util.h"

namespace furrballs {
namespace {

using service::CacheOp;
using service::Dispatcher;
using service::DispatcherOptions;
using service::DispatchMode;
using service::OpKind;

std::string Key(int i) { return "dispatch-" + std::to_string(i); }
std::string Value(int i) {
  std::string v = "v" + std::to_string(i) + ":";
  while (v.size() < 1000) v += char('a' + (v.size() * 3 + i) % 26);
  return v;
}

using spill_testing::Await;

// One op and its completion flag.
struct Call {
  CacheOp op;
  std::string key;       // op.key points here
  std::string value;     // the Set's value / the Get's destination
  std::atomic<bool> done{false};

  static void Done(CacheOp*, void* self) {
    static_cast<Call*>(self)->done = true;
  }
  void Prepare(FurrBall& ball, OpKind kind, const std::string& key) {
    op.kind = kind;
    this->key = key;
    op.hash = ball.Hash(key);
    op.key = this->key;
    op.on_done = &Call::Done;
    op.done_context = this;
    if (kind == OpKind::kSet) op.value = value;
    if (kind == OpKind::kGet) op.value_out = &value;
  }
};

constexpr int kKeys = 3000;  // about 3x the memory

FurrBallOptions OneNodeSpillCache(const Clock* clock) {
  FurrBallOptions o =
      spill_testing::SmallSpillCache(spill_testing::FreshTestDir(), clock);
  o.node_count = 1;  // every key on one node, one worker
  return o;
}

// A one-node cache holding kKeys keys, and one of them whose only copy is
// on disk (spilled_).
class SpilledKeyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<FurrBall>> opened =
        FurrBall::Open(OneNodeSpillCache(&clock_));
    ASSERT_TRUE(opened.ok()) << opened.status();
    ball_ = *std::move(opened);
    for (int i = 0; i < kKeys; ++i) {
      ASSERT_EQ(ball_->Set(Key(i), Value(i)).error, Error::kOk);
      if (i % 16 == 15) {
        spill_testing::WaitFor("the worker never freed pages", [&] {
          return spill_testing::SpillTotals(*ball_).pages_empty >= 2;
        });
      }
    }
    // The oldest keys are on disk.
    for (int i = 0; i < kKeys && spilled_ < 0; ++i) {
      std::string v;
      // Holds() is not public; GetFromMemory tells without reading the disk.
      if (ball_->GetFromMemory(ball_->Ref(Key(i)), &v).on_disk) spilled_ = i;
    }
    ASSERT_GE(spilled_, 0) << "no key was on disk";
  }

  // The held Get of spilled_ finished with its value, read from disk.
  void ExpectReloadedAnswer(const Call& held) const {
    ASSERT_TRUE(held.done.load());
    EXPECT_EQ(held.op.error, Error::kOk);
    EXPECT_TRUE(held.op.get.found);
    EXPECT_TRUE(held.op.get.reloaded);
    EXPECT_EQ(held.value, Value(spilled_));
  }

  ManualClock clock_;
  std::unique_ptr<FurrBall> ball_;
  int spilled_ = -1;
};

TEST_F(SpilledKeyTest, AHeldDiskReadHoldsUpNoOtherOpOfItsNode) {
  FurrBall& ball = *ball_;
  const int spilled = spilled_;

  DispatcherOptions d;
  d.mode = DispatchMode::kNodeJob;
  auto dispatcher = std::make_unique<Dispatcher>(&ball, d);
  spill_testing::HeldPause hold;

  Call held;
  held.Prepare(ball, OpKind::kGet, Key(spilled));
  ASSERT_EQ(dispatcher->Submit(&held.op), Error::kOk);
  const bool paused = hold.AwaitHeld();

  // The node's queue goes on: writes and reads of other keys complete while
  // the disk read is held.
  constexpr int kOthers = 20;
  std::vector<std::unique_ptr<Call>> others;
  bool all_done = paused;
  for (int i = 0; i < kOthers && all_done; ++i) {
    auto set = std::make_unique<Call>();
    set->value = Value(kKeys + i);
    set->Prepare(ball, OpKind::kSet, Key(kKeys + i));
    ASSERT_EQ(dispatcher->Submit(&set->op), Error::kOk);
    auto get = std::make_unique<Call>();
    get->Prepare(ball, OpKind::kGet, Key(kKeys + i));
    ASSERT_EQ(dispatcher->Submit(&get->op), Error::kOk);
    all_done = Await(set->done) && Await(get->done);
    if (all_done) {
      EXPECT_EQ(set->op.error, Error::kOk);
      EXPECT_TRUE(get->op.get.found);
      EXPECT_EQ(get->value, Value(kKeys + i));
    }
    others.push_back(std::move(set));
    others.push_back(std::move(get));
  }
  EXPECT_FALSE(held.done.load()) << "the held Get finished early";
  hold.Release();  // whatever happened, let the read go on
  dispatcher->WaitIdle();
  dispatcher.reset();

  ASSERT_TRUE(paused) << "the Get of a spilled key read no disk";
  EXPECT_TRUE(all_done) << "the node's queue waited for the held disk read";
  ExpectReloadedAnswer(held);
}

// Direct mode (the default) runs ops on the calling gRPC thread, which must
// not wait for the disk either: a Get whose key is only on disk is handed to
// a reload thread, and Submit returns while that read is held (issue 15
// item 6).
TEST_F(SpilledKeyTest, DirectModeHandsADiskReadToAReloadThread) {
  FurrBall& ball = *ball_;
  const int spilled = spilled_;

  DispatcherOptions d;
  d.mode = DispatchMode::kDirect;
  auto dispatcher = std::make_unique<Dispatcher>(&ball, d);
  spill_testing::HeldPause hold;

  Call held;
  held.Prepare(ball, OpKind::kGet, Key(spilled));
  std::atomic<bool> returned{false};
  Error submitted = Error::kOk;
  std::thread caller([&] {
    submitted = dispatcher->Submit(&held.op);
    returned = true;
  });
  const bool paused = hold.AwaitHeld();
  const bool returned_while_held = paused && Await(returned);
  hold.Release();  // whatever happened, let the read go on
  caller.join();
  dispatcher->WaitIdle();
  dispatcher.reset();

  ASSERT_TRUE(paused) << "the Get of a spilled key read no disk";
  EXPECT_TRUE(returned_while_held)
      << "Submit waited for the disk read on the calling thread";
  EXPECT_EQ(submitted, Error::kOk);
  ExpectReloadedAnswer(held);
}

// The Batch stream's SubmitBatch in direct mode hands a disk read to a
// reload thread as Submit does: the Get runs from memory on the calling
// thread, so without the hand-over a spilled key would be answered as a miss.
TEST_F(SpilledKeyTest, DirectModeBatchHandsADiskReadToAReloadThread) {
  FurrBall& ball = *ball_;
  DispatcherOptions d;
  d.mode = DispatchMode::kDirect;
  auto dispatcher = std::make_unique<Dispatcher>(&ball, d);
  spill_testing::HeldPause hold;

  Call held;
  held.Prepare(ball, OpKind::kGet, Key(spilled_));
  CacheOp* ops[] = {&held.op};
  std::atomic<bool> returned{false};
  std::thread caller([&] {
    dispatcher->SubmitBatch(ops, 1);
    returned = true;
  });
  const bool paused = hold.AwaitHeld();
  const bool returned_while_held = paused && Await(returned);
  hold.Release();
  caller.join();
  dispatcher->WaitIdle();
  dispatcher.reset();

  ASSERT_TRUE(paused) << "the batched Get of a spilled key read no disk";
  EXPECT_TRUE(returned_while_held)
      << "SubmitBatch waited for the disk read on the calling thread";
  ExpectReloadedAnswer(held);
}

// A Set whose insert makes ARC evict (a full key table) fills the node's
// batch of victims; when it holds a page, its RocksDB write must not run on
// the Set's thread, which in direct mode is a gRPC callback thread (issue 15
// item 6). It goes to the node's spill writer: while that write is held the
// Sets go on, and no victim is lost to the hand-over.
TEST(SpillWriterTest, DirectModeSetsHandFullVictimBatchesToTheSpillWriter) {
  ManualClock clock;
  FurrBallOptions o = OneNodeSpillCache(&clock);
  o.max_keys_per_node = 200;  // ARC evicts long before the pages fill
  // No maintenance pass during the test: only the Sets' own victims fill
  // (and seal) batches.
  o.maintenance_interval = std::chrono::minutes(10);
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  FurrBall& ball = **opened;
  DispatcherOptions d;
  d.mode = DispatchMode::kDirect;
  auto dispatcher = std::make_unique<Dispatcher>(&ball, d);
  spill_testing::HeldPause hold(
      spill_testing::HeldPause::Point::kVictimBatchWrite);

  constexpr int kSets = 1500;
  std::thread setter([&] {
    for (int i = 0; i < kSets; ++i) {
      Call set;
      set.value = Value(i);
      set.Prepare(ball, OpKind::kSet, Key(i));
      ASSERT_EQ(dispatcher->Submit(&set.op), Error::kOk) << i;
      ASSERT_TRUE(set.done.load()) << "direct mode finishes a Set inline";
      ASSERT_EQ(set.op.error, Error::kOk) << i;
    }
  });
  const std::thread::id setter_id = setter.get_id();
  const bool paused = hold.AwaitHeld();
  const bool on_setter = paused && hold.held_thread() == setter_id;
  hold.Release();  // whatever happened, let the write go on
  setter.join();
  ASSERT_TRUE(paused) << "no batch of victims was written";
  EXPECT_FALSE(on_setter)
      << "the Set's own thread wrote the batch of victims to RocksDB";

  // Backpressure, not loss: the Sets waited for the writer when it fell
  // behind, so the victims are on disk and come back (400 would be found
  // if the batches were dropped; one key may be dropped at a busy batch).
  dispatcher->WaitIdle();
  dispatcher.reset();
  int found = 0;
  std::string v;
  for (int i = 0; i < kSets; ++i) {
    if (!ball.Get(Key(i), &v).found) continue;
    ASSERT_EQ(v, Value(i)) << i;
    ++found;
  }
  EXPECT_GT(found, kSets * 9 / 10);
}

}  // namespace
}  // namespace furrballs
