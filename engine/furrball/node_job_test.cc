#include "engine/furrball/node_job.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <vector>

#include <gtest/gtest.h>

#include "engine/numatic/numatic.h"

namespace furrballs {
namespace furrball_internal {
namespace {

std::unique_ptr<Numatic> MakeNumatic(int nodes) {
  NumaticOptions o;
  o.simulate_nodes = nodes;
  absl::StatusOr<std::unique_ptr<Numatic>> n = Numatic::Create(o);
  EXPECT_TRUE(n.ok()) << n.status();
  return std::move(*n);
}

NodeJob::Options JobOptions(int node, size_t capacity) {
  NodeJob::Options o;
  o.node = node;
  o.queue_capacity = capacity;
  o.maintenance_interval = std::chrono::milliseconds(1);
  return o;
}

TEST(NodeJobTest, InitRunsOnPinnedWorkerAndReportsStatus) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(2);
  int seen_node = -1;
  NodeJob job(numatic.get(), JobOptions(1, 8),
              std::pmr::new_delete_resource(), [&] {
                seen_node = numatic->GetCurrentNode();
                return absl::OkStatus();
              });
  ASSERT_TRUE(job.WaitForInit().ok());
  EXPECT_EQ(seen_node, 1);
}

TEST(NodeJobTest, MaintenanceWaitsLongerWhileIdleAndShortAgainWhenActive) {
  using std::chrono::milliseconds;
  const milliseconds interval{2};
  milliseconds delay = interval;
  std::vector<int64_t> waits;
  for (int pass = 0; pass < 9; ++pass) {
    delay = NextMaintenanceDelay(delay, Maintenance::kIdle, interval);
    waits.push_back(delay.count());
  }
  EXPECT_EQ(waits, (std::vector<int64_t>{4, 8, 16, 32, 64, 128, 128, 128, 128}));
  EXPECT_EQ(NextMaintenanceDelay(delay, Maintenance::kActive, interval),
            interval);
  // An interval above the idle ceiling is never shortened or lengthened.
  const milliseconds slow{500};
  EXPECT_EQ(NextMaintenanceDelay(slow, Maintenance::kIdle, slow), slow);
  EXPECT_EQ(NextMaintenanceDelay(slow, Maintenance::kActive, slow), slow);
}

TEST(NodeJobTest, FailedInitIsReportedAndStopsCleanly) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(1);
  NodeJob job(numatic.get(), JobOptions(0, 8),
              std::pmr::new_delete_resource(),
              [] { return absl::ResourceExhaustedError("no pages"); });
  EXPECT_EQ(job.WaitForInit().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(job.Submit([](void*) {}, nullptr), Error::kShuttingDown);
  job.Stop();
}

TEST(NodeJobTest, RunsJobsInOrderAndMaintenanceRepeatedly) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(1);
  NodeJob job(numatic.get(), JobOptions(0, 64),
              std::pmr::new_delete_resource(),
              [] { return absl::OkStatus(); });
  ASSERT_TRUE(job.WaitForInit().ok());
  std::atomic<int> passes{0};
  Notification enough_passes;
  job.Activate([&] {
    if (passes.fetch_add(1) + 1 == 3) enough_passes.Notify();
    return Maintenance::kActive;
  });
  struct Ctx {
    std::vector<int>* order;
    int value;
  };
  std::vector<int> order;
  std::vector<Ctx> ctx;
  ctx.reserve(10);
  for (int i = 0; i < 10; ++i) ctx.push_back(Ctx{&order, i});
  for (Ctx& c : ctx) {
    ASSERT_EQ(job.Submit(
                  [](void* p) {
                    Ctx* c = static_cast<Ctx*>(p);
                    c->order->push_back(c->value);
                  },
                  &c),
              Error::kOk);
  }
  enough_passes.WaitForNotification();
  job.Stop();  // joins: `order` is safe to read afterwards
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_GE(passes.load(), 3);
}

TEST(NodeJobTest, FullQueueIsRejectedAndQueuedJobsRunOnStop) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(1);
  NodeJob job(numatic.get(), JobOptions(0, 4),
              std::pmr::new_delete_resource(),
              [] { return absl::OkStatus(); });
  ASSERT_TRUE(job.WaitForInit().ok());
  job.Activate([] { return Maintenance::kIdle; });
  // Block the worker inside a job so the queue can be filled exactly.
  Notification entered, release;
  struct Gate {
    Notification* entered;
    Notification* release;
  } gate{&entered, &release};
  ASSERT_EQ(job.Submit(
                [](void* p) {
                  Gate* g = static_cast<Gate*>(p);
                  g->entered->Notify();
                  g->release->WaitForNotification();
                },
                &gate),
            Error::kOk);
  entered.WaitForNotification();
  std::atomic<int> ran{0};
  auto count = [](void* p) { static_cast<std::atomic<int>*>(p)->fetch_add(1); };
  for (size_t i = 0; i < job.queue_capacity(); ++i) {
    ASSERT_EQ(job.Submit(count, &ran), Error::kOk);
  }
  EXPECT_EQ(job.Submit(count, &ran), Error::kQueueFull);
  release.Notify();
  job.Stop();
  EXPECT_EQ(ran.load(), static_cast<int>(job.queue_capacity()))
      << "every accepted job runs before Stop returns";
  EXPECT_EQ(job.Submit(count, &ran), Error::kShuttingDown);
}

TEST(NodeJobTest, StopBeforeActivateDoesNotHang) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(2);
  std::vector<std::unique_ptr<NodeJob>> jobs;
  for (int n = 0; n < 2; ++n) {
    jobs.push_back(std::make_unique<NodeJob>(
        numatic.get(), JobOptions(n, 4), std::pmr::new_delete_resource(),
        [] { return absl::OkStatus(); }));
  }
  for (auto& j : jobs) j->Stop();
  for (auto& j : jobs) j->Stop();  // idempotent
}

}  // namespace
}  // namespace furrball_internal
}  // namespace furrballs
