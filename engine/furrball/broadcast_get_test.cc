#include "engine/furrball/broadcast_get.h"

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/furrball/node_job.h"
#include "engine/furrball/sync.h"
#include "engine/numatic/numatic.h"

namespace furrballs {
namespace furrball_internal {
namespace {

// Real pinned workers on a simulated topology, as a FurrBall has them.
class BroadcastGetTest : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    NumaticOptions o;
    o.simulate_nodes = GetParam();
    absl::StatusOr<std::unique_ptr<Numatic>> n = Numatic::Create(o);
    ASSERT_TRUE(n.ok()) << n.status();
    numatic_ = std::move(*n);
    for (int i = 0; i < GetParam(); ++i) {
      NodeJob::Options jo;
      jo.node = i;
      jo.queue_capacity = 1;  // so that a test can fill a queue
      jobs_.push_back(std::make_unique<NodeJob>(
          numatic_.get(), jo, std::pmr::new_delete_resource(),
          [] { return absl::OkStatus(); }));
      ASSERT_TRUE(jobs_.back()->WaitForInit().ok());
      jobs_.back()->Activate([] { return Maintenance::kIdle; });
    }
  }

  int n() const { return GetParam(); }

  Error Submit(int i, void (*job)(void*), void* context) {
    return jobs_[i]->Submit(job, context);
  }

  // Runs a race whose probe of node i hits iff hits[i], with the value
  // "v<i>"; records the node each probe ran on.
  RaceOutcome Race(int self, const std::vector<bool>& hits, std::string* value,
                   std::vector<int>* ran_on) {
    ran_on->assign(n(), -1);
    return RunBroadcastGet(
        n(), self,
        [this](int i, void (*job)(void*), void* c) { return Submit(i, job, c); },
        [&](int i, std::string* v, EntryKind* k) {
          (*ran_on)[i] = numatic_->GetCurrentNode();
          GetResult r;
          r.found = hits[i];
          if (r.found) {
            *v = "v" + std::to_string(i);
            *k = EntryKind::kChunkedHead;
            r.version = 100 + i;
          } else {
            v->clear();
          }
          return r;
        },
        value);
  }

  std::unique_ptr<Numatic> numatic_;
  std::vector<std::unique_ptr<NodeJob>> jobs_;
};

TEST_P(BroadcastGetTest, TheNodeThatHoldsTheKeyWinsFromAnyCaller) {
  for (int holder = 0; holder < n(); ++holder) {
    for (int self = 0; self < n(); ++self) {
      std::vector<bool> hits(n(), false);
      hits[holder] = true;
      std::string value = "old";
      std::vector<int> ran_on;
      const RaceOutcome out = Race(self, hits, &value, &ran_on);
      EXPECT_EQ(out.winner, holder);
      EXPECT_TRUE(out.result.found);
      EXPECT_EQ(out.result.version, 100u + holder);
      EXPECT_EQ(out.kind, EntryKind::kChunkedHead);
      EXPECT_EQ(value, "v" + std::to_string(holder));
      EXPECT_EQ(out.fallbacks, 0);
      // Every other node's probe ran on that node's worker.
      for (int i = 0; i < n(); ++i) {
        if (i != self) {
          EXPECT_EQ(ran_on[i], i) << "probe " << i;
        }
      }
    }
  }
}

TEST_P(BroadcastGetTest, AllMissIsAMissAfterEveryNodeAnswered) {
  std::string value = "old";
  std::vector<int> ran_on;
  const RaceOutcome out = Race(0, std::vector<bool>(n(), false), &value,
                               &ran_on);
  EXPECT_EQ(out.winner, -1);
  EXPECT_FALSE(out.result.found);
  EXPECT_EQ(value, "");
  for (int i = 0; i < n(); ++i) EXPECT_NE(ran_on[i], -1) << "probe " << i;
}

TEST_P(BroadcastGetTest, TwoCopiesGiveOneWinnerAndItsOwnValue) {
  // A key between two nodes (a move in progress) hits on both.
  std::vector<bool> hits(n(), false);
  hits[0] = hits[n() - 1] = true;
  for (int round = 0; round < 50; ++round) {
    std::string value;
    std::vector<int> ran_on;
    const RaceOutcome out = Race(round % n(), hits, &value, &ran_on);
    ASSERT_TRUE(out.winner == 0 || out.winner == n() - 1) << out.winner;
    EXPECT_EQ(value, "v" + std::to_string(out.winner));
    EXPECT_EQ(out.result.version, 100u + out.winner);
  }
}

TEST_P(BroadcastGetTest, AFullQueueIsProbedByTheCaller) {
  const int busy = n() - 1;
  // Hold node `busy`'s worker in a job and fill its one-slot queue.
  Notification release, running;
  struct Blocker {
    Notification* running;
    Notification* release;
  } blocker{&running, &release};
  ASSERT_EQ(Submit(busy,
                   [](void* c) {
                     auto* b = static_cast<Blocker*>(c);
                     b->running->Notify();
                     b->release->WaitForNotification();
                   },
                   &blocker),
            Error::kOk);
  running.WaitForNotification();
  ASSERT_EQ(Submit(busy, [](void*) {}, nullptr), Error::kOk);
  ASSERT_EQ(Submit(busy, [](void*) {}, nullptr), Error::kQueueFull);

  std::vector<bool> hits(n(), false);
  hits[busy] = true;
  std::string value;
  std::vector<int> ran_on;
  const RaceOutcome out = Race(0, hits, &value, &ran_on);
  EXPECT_EQ(out.fallbacks, 1);
  EXPECT_EQ(out.winner, busy);
  EXPECT_EQ(value, "v" + std::to_string(busy));
  EXPECT_EQ(ran_on[busy], numatic_->GetCurrentNode());  // the caller's thread
  release.Notify();
  jobs_[busy]->Stop();  // the blocker's notifications are on this stack
}

TEST_P(BroadcastGetTest, AStoppedWorkerIsProbedByTheCaller) {
  jobs_[n() - 1]->Stop();
  std::vector<bool> hits(n(), false);
  hits[n() - 1] = true;
  std::string value;
  std::vector<int> ran_on;
  const RaceOutcome out = Race(0, hits, &value, &ran_on);
  EXPECT_EQ(out.fallbacks, 1);
  EXPECT_EQ(out.winner, n() - 1);
  EXPECT_EQ(value, "v" + std::to_string(n() - 1));
}

TEST_P(BroadcastGetTest, ConcurrentCallersEachGetTheirOwnAnswer) {
  // Callers share the workers; each asks for a key on another node.
  std::vector<std::thread> callers;
  std::atomic<int> wrong{0}, full{0};
  for (int t = 0; t < 4; ++t) {
    callers.emplace_back([&, t] {
      for (int round = 0; round < 200; ++round) {
        const int holder = (t + round) % n();
        std::vector<bool> hits(n(), false);
        hits[holder] = true;
        std::string value;
        std::vector<int> ran_on;
        const RaceOutcome out = Race(t % n(), hits, &value, &ran_on);
        if (out.winner != holder || value != "v" + std::to_string(holder)) {
          wrong.fetch_add(1);
        }
        // One-slot queues: some probes fall back; still right.
        full.fetch_add(out.fallbacks);
      }
    });
  }
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(wrong.load(), 0);
}

INSTANTIATE_TEST_SUITE_P(Nodes, BroadcastGetTest, ::testing::Values(2, 4),
                         [](const auto& info) {
                           return std::to_string(info.param) + "Nodes";
                         });

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
