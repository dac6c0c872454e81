// The CPU cost of a Get by value size, small values against chunked ones
// (chunked_value.h): what a chunked Get's read section costs, and that a
// small value's Get pays nothing for it. Uses the public FurrBall API only,
// so the same file builds against an older engine for an A/B
// (bench/results/2026-11-25-chunkgrace/README.md).
//
// One thread, one node, 64 KiB pages (a 64 KiB value is 9 chunks, a 1 MiB
// one 129), no writer: each round reads one key of each size `gets` times
// and prints the thread's CPU time per Get (CLOCK_THREAD_CPUTIME_ID, so
// other processes on the machine do not count). Rounds alternate the sizes.
//
// Usage: chunked_value_bench [rounds] [gets]
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "engine/furrball/furrball.h"

namespace furrballs {
namespace {

uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1'000'000'000 + uint64_t(ts.tv_nsec);
}

int Main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int base_gets = argc > 2 ? std::atoi(argv[2]) : 20000;
  FurrBallOptions o;
  o.memory_budget_bytes = size_t{64} << 20;
  o.page_size_bytes = 64 * 1024;
  o.node_count = 1;
  o.simulate_topology = true;
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 1;
  }
  FurrBall& ball = **opened;
  const std::vector<size_t> sizes = {100, 4000, 64 * 1024, (1 << 20) - 64};
  for (size_t size : sizes) {
    const std::string key = "k" + std::to_string(size);
    if (ball.Set(key, std::string(size, 'v')).error != Error::kOk) {
      std::fprintf(stderr, "Set of %zu bytes failed\n", size);
      return 1;
    }
  }
  std::string got;
  for (int round = 0; round < rounds; ++round) {
    for (size_t size : sizes) {
      const std::string key = "k" + std::to_string(size);
      // Fewer Gets of large values: about the same bytes copied per size
      // above 64 KiB.
      const int gets =
          size > 64 * 1024 ? base_gets / 16 : base_gets;
      const uint64_t start = ThreadCpuNs();
      for (int i = 0; i < gets; ++i) {
        if (!ball.Get(key, &got).found || got.size() != size) {
          std::fprintf(stderr, "Get of %zu bytes failed\n", size);
          return 1;
        }
      }
      const uint64_t ns = ThreadCpuNs() - start;
      std::printf("round %d size %zu gets %d cpu_ns_per_get %.1f\n", round,
                  size, gets, double(ns) / gets);
    }
  }
  return 0;
}

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) { return furrballs::Main(argc, argv); }
