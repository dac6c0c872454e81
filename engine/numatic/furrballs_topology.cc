// furrballs_topology: prints the NUMA topology a Furrballs server would use,
// real or simulated, and optionally proves memory and thread placement.
//
// Thread safety: a single-threaded command (the placement check starts and
// joins one thread per node, one at a time).
//
//   furrballs_topology                      # what this process may use
//   taskset -c 1 furrballs_topology         # as a restricted cpuset sees it
//   furrballs_topology --simulate_nodes=4 --simulate_remote_delay_ns=70
//   furrballs_topology --verify_placement   # allocate, query, pin per node
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_cat.h>

#include "engine/numatic/numatic.h"

ABSL_FLAG(int, simulate_nodes, 0,
          "0: the machine's real topology. N (1..64): simulate N virtual "
          "nodes over the allowed CPUs.");
ABSL_FLAG(int, simulate_remote_distance, furrballs::kDefaultRemoteDistance,
          "Distance between different virtual nodes when simulating.");
ABSL_FLAG(uint64_t, simulate_remote_delay_ns, 0,
          "Busy-wait injected per remote access (report §5.1); 0 disables. "
          "Applies to real topologies too.");
ABSL_FLAG(bool, verify_placement, false,
          "Allocate a block on each node and report the node its pages are "
          "on (move_pages query), and pin a thread to each node and report "
          "GetCurrentNode. Exits 1 if anything disagrees.");
ABSL_FLAG(uint64_t, verify_bytes, 4 << 20,
          "Bytes allocated per node by --verify_placement.");

namespace furrballs {
namespace {

std::string PageKindName(PageKind kind) {
  switch (kind) {
    case PageKind::kBase: return "base";
    case PageKind::kHugeTlb: return "hugetlb";
    case PageKind::kTransparentHuge: return "transparent-huge";
  }
  return "unknown";
}

// Returns the number of disagreements.
int VerifyPlacement(const Numatic& numatic, uint64_t bytes) {
  int failures = 0;
  for (int node : numatic.topology().node_ids()) {
    std::string line = absl::StrCat("verify node ", node, ": ");
    absl::StatusOr<NumaBlock> block = numatic.AllocateOnNode(bytes, node);
    if (!block.ok()) {
      absl::StrAppend(&line, "allocation failed: ", block.status().ToString());
      ++failures;
    } else {
      absl::StatusOr<int> page_node = GetPageNode(block->data);
      if (!page_node.ok()) {
        absl::StrAppend(&line, "page query failed: ",
                        page_node.status().ToString());
        ++failures;
      } else {
        absl::StrAppend(&line, "memory on node ", *page_node);
        if (numatic.topology().simulated()) {
          absl::StrAppend(&line, " (real node; simulated memory is not bound)");
        } else if (*page_node != node) {
          absl::StrAppend(&line, " MISPLACED");
          ++failures;
        }
      }
      numatic.Free(*block);
    }
    std::thread([&] {
      const absl::Status pinned = numatic.PinCurrentThreadToNode(node);
      if (!pinned.ok()) {
        absl::StrAppend(&line, "; pinning failed: ", pinned.ToString());
        ++failures;
        return;
      }
      const int current = numatic.GetCurrentNode();
      absl::StrAppend(&line, "; pinned thread reports node ", current,
                      " (uncached ", numatic.GetCurrentNodeUncached(), ")");
      if (current != node) {
        absl::StrAppend(&line, " MISMATCH");
        ++failures;
      }
    }).join();
    std::printf("%s\n", line.c_str());
  }
  return failures;
}

int Run() {
  NumaticOptions options;
  options.simulate_nodes = absl::GetFlag(FLAGS_simulate_nodes);
  options.simulated_remote_distance =
      absl::GetFlag(FLAGS_simulate_remote_distance);
  options.remote_access_delay_ns =
      absl::GetFlag(FLAGS_simulate_remote_delay_ns);
  absl::StatusOr<std::unique_ptr<Numatic>> numatic = Numatic::Create(options);
  if (!numatic.ok()) {
    std::fprintf(stderr, "furrballs_topology: %s\n",
                 numatic.status().ToString().c_str());
    return 2;
  }
  std::printf("%s\n", (*numatic)->topology().Summary().c_str());
  std::printf("%s", (*numatic)->topology().ToString().c_str());
  std::printf("remote access delay: %llu ns%s\n",
              static_cast<unsigned long long>(
                  (*numatic)->remote_access_delay_ns()),
              (*numatic)->remote_access_delay_ns() == 0 ? " (off)" : "");
  const HugePageInfo huge = GetHugePageInfo();
  std::printf(
      "huge pages: %s (size %zu KiB, hugetlb free pages %llu, THP %s)\n",
      IsHugePagesAvailable() ? "available" : "unavailable",
      huge.page_size >> 10,
      static_cast<unsigned long long>(huge.hugetlb_free_pages),
      huge.transparent_mode.empty() ? "unknown"
                                    : huge.transparent_mode.c_str());
  if (!absl::GetFlag(FLAGS_verify_placement)) return 0;

  const int failures =
      VerifyPlacement(**numatic, absl::GetFlag(FLAGS_verify_bytes));
  absl::StatusOr<NumaBlock> huge_block = (*numatic)->AllocateOnNodeHuge(
      1, (*numatic)->topology().nodes().front().id);
  if (huge_block.ok()) {
    std::printf("huge allocation: %zu bytes as %s pages\n", huge_block->size,
                PageKindName(huge_block->pages).c_str());
    (*numatic)->Free(*huge_block);
  } else {
    std::printf("huge allocation failed: %s\n",
                huge_block.status().ToString().c_str());
  }
  std::printf("placement: %s\n", failures == 0 ? "OK" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Prints the NUMA topology a Furrballs server would use: allowed CPUs, "
      "nodes, CPUs and memory per node, the distance matrix and huge page "
      "availability.\nUsage: furrballs_topology [--simulate_nodes=N] "
      "[--simulate_remote_delay_ns=D] [--verify_placement]");
  absl::ParseCommandLine(argc, argv);
  return furrballs::Run();
}
