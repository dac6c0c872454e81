// Dispatcher tests against a real engine. A node's worker is held inside a
// job that waits on a notification, so ops pile up in its queue and the
// batch the worker then takes is known exactly — no sleeps, no timing.
#include "service/dispatcher.h"

#include <latch>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/furrball.h"

namespace furrballs::service {
namespace {

// The queued mode these tests are about (direct is the default).
DispatcherOptions NodeJobOptions() {
  DispatcherOptions o;
  o.mode = DispatchMode::kNodeJob;
  return o;
}

class DispatcherTest : public ::testing::Test {
 protected:
  void SetUp() override { OpenEngine({0, 1}); }

  // A simulated engine whose nodes have ids `ids`.
  void OpenEngine(std::vector<int> ids) {
    engine_.reset();
    FurrBallOptions o;
    o.memory_budget_bytes = size_t{24} << 20;  // 2 MiB pages for 1 MiB values
    o.page_size_bytes = size_t{2} << 20;
    o.simulate_topology = true;
    o.node_count = static_cast<int>(ids.size());
    o.simulated_node_ids = std::move(ids);
    o.pin_workers = false;
    auto engine = FurrBall::Open(o);
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = std::move(*engine);
  }

  // The dispatch statistics of node `node` (an id).
  static DispatchStats StatsOf(const Dispatcher& d, int node) {
    for (const DispatchStats& s : d.Stats()) {
      if (s.node == node) return s;
    }
    ADD_FAILURE() << "no dispatch statistics for node " << node;
    return DispatchStats{};
  }

  // Parks `node`'s worker until Release().
  void HoldWorker(int node) {
    ASSERT_EQ(engine_->SubmitToNode(
                  node,
                  [](void* ctx) {
                    auto* self = static_cast<DispatcherTest*>(ctx);
                    self->held_.count_down();
                    self->release_.wait();
                  },
                  this),
              Error::kOk);
    held_.wait();
  }
  void Release() { release_.count_down(); }

  struct Recorded {
    CacheOp op;
    std::string key;  // op.key points here
    std::string value;
    std::string out;
    bool done = false;
  };

  static void MarkDone(CacheOp*, void* ctx) {
    static_cast<Recorded*>(ctx)->done = true;
  }

  std::unique_ptr<Recorded> MakeSet(const std::string& key,
                                    const std::string& value) {
    auto r = std::make_unique<Recorded>();
    r->value = value;
    r->op.kind = OpKind::kSet;
    r->key = key;
    r->op.hash = engine_->Hash(key);
    r->op.key = r->key;
    r->op.value = r->value;
    r->op.on_done = &MarkDone;
    r->op.done_context = r.get();
    return r;
  }

  std::unique_ptr<Recorded> MakeGet(const std::string& key) {
    auto r = std::make_unique<Recorded>();
    r->op.kind = OpKind::kGet;
    r->key = key;
    r->op.hash = engine_->Hash(key);
    r->op.key = r->key;
    r->op.value_out = &r->out;
    r->op.on_done = &MarkDone;
    r->op.done_context = r.get();
    return r;
  }

  std::unique_ptr<FurrBall> engine_;
  // std::latch, not absl::Notification: the system Abseil is not built
  // with ThreadSanitizer, so the order a Notification gives (Release()
  // before the worker runs the held ops) was invisible to it and it reported
  // the ops' `done` flags as racing with the test's reads.
  std::latch held_{1}, release_{1};
};

TEST_F(DispatcherTest, WriteCompactionMergesARunAndReservesVersions) {
  Dispatcher d(engine_.get(), NodeJobOptions());
  const int node = d.NodeFor(engine_->Hash("hot"));
  HoldWorker(node);
  auto a = MakeSet("hot", "a");
  auto b = MakeSet("hot", "b");
  auto c = MakeSet("hot", "c");
  for (auto* r : {a.get(), b.get(), c.get()}) {
    ASSERT_EQ(d.Submit(&r->op), Error::kOk);
  }
  Release();
  d.Stop();
  d.WaitIdle();
  for (auto* r : {a.get(), b.get(), c.get()}) {
    ASSERT_TRUE(r->done);
    EXPECT_EQ(r->op.error, Error::kOk);
  }
  // The merged writes got the versions just below the applied one.
  EXPECT_EQ(b->op.set.version + 1, c->op.set.version);
  EXPECT_EQ(a->op.set.version + 2, c->op.set.version);
  EXPECT_EQ(StatsOf(d, node).merged_writes, 2u);

  std::string value;
  GetResult got = engine_->Get(engine_->Ref("hot"), &value);
  ASSERT_TRUE(got.found);
  EXPECT_EQ(value, "c");
  EXPECT_EQ(got.version, c->op.set.version);
  // A compare-and-set against a merged write's version must fail.
  WriteOptions cas;
  cas.mode = SetMode::kIfVersion;
  cas.expected_version = b->op.set.version;
  EXPECT_EQ(engine_->Set(engine_->Ref("hot"), "x", cas).error,
            Error::kVersionMismatch);
}

TEST_F(DispatcherTest, AReadBetweenWritesBreaksTheRun) {
  Dispatcher d(engine_.get(), NodeJobOptions());
  const int node = d.NodeFor(engine_->Hash("k"));
  HoldWorker(node);
  auto a = MakeSet("k", "a");
  auto g = MakeGet("k");
  auto b = MakeSet("k", "b");
  for (auto* r : {a.get(), g.get(), b.get()}) {
    ASSERT_EQ(d.Submit(&r->op), Error::kOk);
  }
  Release();
  d.Stop();
  d.WaitIdle();
  ASSERT_TRUE(g->done);
  EXPECT_TRUE(g->op.get.found);
  EXPECT_EQ(g->out, "a");  // the read saw the first write, so it was applied
  EXPECT_EQ(StatsOf(d, node).merged_writes, 0u);
}

TEST_F(DispatcherTest, CompactionOffAppliesEveryWrite) {
  DispatcherOptions o = NodeJobOptions();
  o.write_compaction = false;
  Dispatcher d(engine_.get(), o);
  const int node = d.NodeFor(engine_->Hash("hot"));
  HoldWorker(node);
  auto a = MakeSet("hot", "a");
  auto b = MakeSet("hot", "b");
  ASSERT_EQ(d.Submit(&a->op), Error::kOk);
  ASSERT_EQ(d.Submit(&b->op), Error::kOk);
  Release();
  d.Stop();
  d.WaitIdle();
  EXPECT_LT(a->op.set.version, b->op.set.version);
  EXPECT_EQ(StatsOf(d, node).merged_writes, 0u);
}

TEST_F(DispatcherTest, FullQueueFailsFast) {
  DispatcherOptions o = NodeJobOptions();
  o.queue_capacity = 2;
  Dispatcher d(engine_.get(), o);
  const int node = d.NodeFor(engine_->Hash("q"));
  HoldWorker(node);
  auto a = MakeSet("q", "1");
  auto b = MakeSet("q", "2");
  auto c = MakeSet("q", "3");
  ASSERT_EQ(d.Submit(&a->op), Error::kOk);
  ASSERT_EQ(d.Submit(&b->op), Error::kOk);
  EXPECT_EQ(d.Submit(&c->op), Error::kQueueFull);
  EXPECT_EQ(StatsOf(d, node).rejected_queue_full, 1u);
  Release();
  d.Stop();
  d.WaitIdle();
  EXPECT_TRUE(a->done);
  EXPECT_TRUE(b->done);
  EXPECT_FALSE(c->done);
}

TEST_F(DispatcherTest, ExpiredOpsAreNotExecuted) {
  Dispatcher d(engine_.get(), NodeJobOptions());
  const int node = d.NodeFor(engine_->Hash("late"));
  HoldWorker(node);
  auto late = MakeSet("late", "v");
  late->op.deadline = CacheOp::Clock::now();  // passes while queued
  ASSERT_EQ(d.Submit(&late->op), Error::kOk);
  Release();
  d.Stop();
  d.WaitIdle();
  ASSERT_TRUE(late->done);
  EXPECT_TRUE(late->op.deadline_exceeded);
  std::string value;
  EXPECT_FALSE(engine_->Get(engine_->Ref("late"), &value).found);
  EXPECT_EQ(StatsOf(d, node).deadline_expired, 1u);
}

// A process confined to node 1 of a two-node machine (a pod pinned there):
// its only node has id 1 and index 0. Ops go to that node's queue and
// worker, and the statistics name node 1. (The queues were indexed by the
// node id: Submit read past the one-element queue vector.)
TEST_F(DispatcherTest, TheOnlyNodeIsNodeOne) {
  OpenEngine({1});
  ASSERT_EQ(engine_->router().IdOf(0), 1);
  Dispatcher d(engine_.get(), NodeJobOptions());
  EXPECT_EQ(d.NodeFor(engine_->Hash("k")), 1);
  HoldWorker(1);
  auto set = MakeSet("k", "v");
  auto get = MakeGet("k");
  ASSERT_EQ(d.Submit(&set->op), Error::kOk);
  ASSERT_EQ(d.Submit(&get->op), Error::kOk);
  EXPECT_FALSE(set->done) << "ran without node 1's worker";
  Release();
  d.Stop();
  d.WaitIdle();
  ASSERT_TRUE(set->done);
  ASSERT_TRUE(get->done);
  EXPECT_EQ(set->op.error, Error::kOk);
  EXPECT_TRUE(get->op.get.found);
  EXPECT_EQ(get->out, "v");
  const std::vector<DispatchStats> stats = d.Stats();
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].node, 1);
  EXPECT_EQ(stats[0].ops, 2u);
  ASSERT_EQ(engine_->Stats().size(), 1u);
  EXPECT_EQ(engine_->Stats()[0].node, 1);
}

TEST_F(DispatcherTest, StoppedDispatcherRejects) {
  Dispatcher d(engine_.get(), NodeJobOptions());
  d.Stop();
  auto a = MakeSet("s", "v");
  EXPECT_EQ(d.Submit(&a->op), Error::kShuttingDown);
  EXPECT_FALSE(a->done);
}

TEST_F(DispatcherTest, DirectModeRunsInline) {
  DispatcherOptions o;
  o.mode = DispatchMode::kDirect;
  Dispatcher d(engine_.get(), o);
  auto a = MakeSet("direct", "v");
  ASSERT_EQ(d.Submit(&a->op), Error::kOk);
  EXPECT_TRUE(a->done);  // completed before Submit returned
  auto g = MakeGet("direct");
  ASSERT_EQ(d.Submit(&g->op), Error::kOk);
  EXPECT_EQ(g->out, "v");
}

TEST_F(DispatcherTest, SubmitBatchQueuesARunAndRefusesWhatDoesNotFit) {
  DispatcherOptions o = NodeJobOptions();
  o.queue_capacity = 2;
  Dispatcher d(engine_.get(), o);
  const int node = d.NodeFor(engine_->Hash("q"));
  HoldWorker(node);
  auto a = MakeSet("q", "1");
  auto b = MakeSet("q", "2");
  auto c = MakeSet("q", "3");
  CacheOp* ops[] = {&a->op, &b->op, &c->op};
  d.SubmitBatch(ops, 3);
  // The op past the capacity completed at once, with the error.
  EXPECT_TRUE(c->done);
  EXPECT_EQ(c->op.error, Error::kQueueFull);
  EXPECT_FALSE(a->done);
  EXPECT_EQ(d.Stats()[node].rejected_queue_full, 1u);
  Release();
  d.Stop();
  d.WaitIdle();
  ASSERT_TRUE(a->done);
  ASSERT_TRUE(b->done);
  EXPECT_EQ(a->op.error, Error::kOk);
  EXPECT_EQ(b->op.error, Error::kOk);
  std::string value;
  ASSERT_TRUE(engine_->Get(engine_->Ref("q"), &value).found);
  EXPECT_EQ(value, "2");

  auto late = MakeSet("q", "4");
  CacheOp* after_stop[] = {&late->op};
  d.SubmitBatch(after_stop, 1);
  EXPECT_TRUE(late->done);
  EXPECT_EQ(late->op.error, Error::kShuttingDown);
}

TEST_F(DispatcherTest, SubmitBatchInDirectModeRunsInlineAndChecksDeadlines) {
  DispatcherOptions o;
  o.mode = DispatchMode::kDirect;
  Dispatcher d(engine_.get(), o);
  auto set = MakeSet("direct", "v");
  auto get = MakeGet("direct");
  auto late = MakeSet("late", "v");
  late->op.deadline = CacheOp::Clock::time_point::min();
  CacheOp* ops[] = {&set->op, &get->op, &late->op};
  d.SubmitBatch(ops, 3);
  ASSERT_TRUE(set->done && get->done && late->done);
  EXPECT_EQ(get->out, "v");  // ops run in the order given
  EXPECT_TRUE(late->op.deadline_exceeded);
  std::string value;
  EXPECT_FALSE(engine_->Get(engine_->Ref("late"), &value).found);
}

}  // namespace
}  // namespace furrballs::service
