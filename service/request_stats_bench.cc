// What request statistics cost on the request path, measured with them on
// and off in the same run.
//
//   BM_RequestPath/stats:{0,1}   the service's per-request work minus gRPC:
//       hash the key, submit a Get to the Dispatcher (direct mode, so it runs
//       inline against a real 4-node FurrBall) and complete it; with stats:1
//       the clock is read at "handler entry" and RequestStats::RecordSince
//       runs at completion, exactly as service/cache_service.cc does.
//   BM_RecordSince               the recording alone (two clock reads and
//       three single-writer counter updates), on 1 and 2 threads.
//   BM_SharedAtomicRecord        the design report §3.7 rules out, for
//       contrast: the same counters as one shared array updated with
//       fetch_add from every thread.
//
// bazel run -c opt //service:request_stats_bench -- --benchmark_repetitions=5
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "engine/furrball/furrball.h"
#include "service/dispatcher.h"
#include "service/request_stats.h"

namespace furrballs::metrics {
namespace {

using service::CacheOp;
using service::RequestOp;
using service::RequestStats;

constexpr int kKeys = 4096;  // a power of two, for the index mask

struct Fixture {
  Fixture() {
    FurrBallOptions o;
    o.memory_budget_bytes = size_t{64} << 20;
    o.simulate_topology = true;
    o.node_count = 4;
    o.pin_workers = false;
    absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
    if (!opened.ok()) {
      std::fprintf(stderr, "cannot open the engine: %s\n",
                   std::string(opened.status().message()).c_str());
      std::exit(1);
    }
    engine = std::move(*opened);
    service::DispatcherOptions d;
    d.mode = service::DispatchMode::kDirect;
    dispatcher = std::make_unique<service::Dispatcher>(engine.get(), d);
    for (int i = 0; i < kKeys; ++i) {
      keys.push_back("bench-key-" + std::to_string(i));
      engine->Set(keys.back(), std::string(64, 'v'));
    }
  }

  std::unique_ptr<FurrBall> engine;
  std::unique_ptr<service::Dispatcher> dispatcher;
  std::vector<std::string> keys;
};

Fixture& SharedFixture() {
  static Fixture* fixture = new Fixture;
  return *fixture;
}

// One in-flight request, as the service's UnaryCall holds it.
struct Call {
  CacheOp op;
  RequestStats* stats = nullptr;
  RequestStats::Clock::time_point start;
  std::string value;
};

void DoneWithStats(CacheOp* op, void* context) {
  auto* call = static_cast<Call*>(context);
  call->stats->RecordSince(RequestOp::kGet, op->get.found ? 0 : 5, call->start);
}

void DoneWithoutStats(CacheOp* op, void*) { benchmark::DoNotOptimize(op->get.found); }

void BM_RequestPath(benchmark::State& state) {
  Fixture& f = SharedFixture();
  static RequestStats stats;
  const bool with_stats = state.range(0) != 0;
  Call call;
  call.stats = &stats;
  size_t i = 0;
  for (auto _ : state) {
    if (with_stats) call.start = RequestStats::Clock::now();
    call.op = CacheOp{};
    call.op.kind = service::OpKind::kGet;
    const std::string& key = f.keys[i++ & (kKeys - 1)];
    call.op.hash = f.engine->Hash(key);
    call.op.key = key;
    call.op.value_out = &call.value;
    call.op.on_done = with_stats ? &DoneWithStats : &DoneWithoutStats;
    call.op.done_context = &call;
    if (f.dispatcher->Submit(&call.op) != Error::kOk) {
      state.SkipWithError("Submit failed");
      break;
    }
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RequestPath)->ArgName("stats")->Arg(0)->Arg(1);

void BM_RecordSince(benchmark::State& state) {
  static RequestStats stats;
  for (auto _ : state) {
    const auto start = RequestStats::Clock::now();
    stats.RecordSince(RequestOp::kGet, 0, start);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_RecordSince)->Threads(1)->Threads(2);

// The same three counter updates on one array shared by all threads.
struct SharedCounters {
  std::array<std::atomic<uint64_t>, service::kRequestOpCount * service::kStatusCodeCount>
      requests{};
  std::array<std::atomic<uint64_t>, service::kRequestOpCount * service::kLatencyBucketCount>
      buckets{};
  std::array<std::atomic<uint64_t>, service::kRequestOpCount> sum_ns{};
};

void BM_SharedAtomicRecord(benchmark::State& state) {
  static SharedCounters counters;
  const int op = static_cast<int>(RequestOp::kGet);
  for (auto _ : state) {
    const auto start = RequestStats::Clock::now();
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        RequestStats::Clock::now() - start)
                        .count();
    counters.requests[op * service::kStatusCodeCount].fetch_add(1, std::memory_order_relaxed);
    counters.buckets[op * service::kLatencyBucketCount +
                     service::LatencyBucketOf(static_cast<uint64_t>(ns))]
        .fetch_add(1, std::memory_order_relaxed);
    counters.sum_ns[op].fetch_add(static_cast<uint64_t>(ns), std::memory_order_relaxed);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SharedAtomicRecord)->Threads(1)->Threads(2);

}  // namespace
}  // namespace furrballs::metrics

BENCHMARK_MAIN();
