// numa_guest_probe: runs inside a multi-node QEMU guest (numa_guest_test.sh)
// and reports, in machine-readable lines, what Numatic sees and does there.
//
// Thread safety: single-threaded except for one short-lived pinned thread
// per node, started and joined in turn.
//
// Output, one line per fact, all prefixed so the host can grep them out of
// the serial console:
//
//   NUMATIC_GUEST <label> online=<sysfs> nodes=<ids> allowed_cpus=<cpus>
//       excluded=<ids> rejected=<id>:<ERROR>
//   NUMATIC_GUEST <label> summary=<Topology::Summary()>
//   NUMATIC_GUEST <label> node=<k> cpus=<cpus> distances=<row>
//       memory=<node of every page of a block for k, or "mixed:...">
//       huge=<page kind>@<node> pmr=<node> pinned=<cached>/<uncached>
//       moved=<node of the pages after MovePages to the next node>
//   NUMATIC_GUEST_RESULT <label> failures=<n>
//
// The probe counts a failure whenever Numatic contradicts itself (memory for
// node k not on k, a pinned thread reporting another node, ...). The host
// compares every line with what the QEMU command line configured, which also
// catches mistakes the probe cannot see on its own (a missing node, a wrong
// distance, a cpuset that did not narrow the topology).
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory_resource>
#include <string>
#include <thread>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

#include "engine/common/error.h"
#include "engine/numatic/numatic.h"

namespace furrballs {
namespace {

constexpr size_t kBlockBytes = 8 << 20;

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string PageKindName(PageKind kind) {
  switch (kind) {
    case PageKind::kBase: return "base";
    case PageKind::kHugeTlb: return "hugetlb";
    case PageKind::kTransparentHuge: return "thp";
  }
  return "unknown";
}

// The node of every page of `block`: "k" if all agree, "mixed:a,b,..."
// otherwise, "error:..." if the kernel could not say.
std::string NodeOfAllPages(const NumaBlock& block) {
  std::vector<const void*> pages;
  for (size_t offset = 0; offset < block.size; offset += GetPageSize()) {
    pages.push_back(static_cast<const char*>(block.data) + offset);
  }
  absl::StatusOr<std::vector<int>> nodes = QueryPageNodes(pages);
  if (!nodes.ok()) return absl::StrCat("error:", nodes.status().message());
  std::vector<int> distinct = *nodes;
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()),
                 distinct.end());
  if (distinct.size() == 1) return absl::StrCat(distinct[0]);
  return absl::StrCat("mixed:", absl::StrJoin(distinct, ","));
}

class Probe {
 public:
  Probe(const std::string& label, const Numatic& numatic)
      : label_(label), numatic_(numatic) {}

  int Run() {
    const Topology& topology = numatic_.topology();
    std::vector<int> excluded;
    for (const ExcludedNode& node : topology.excluded_nodes()) {
      excluded.push_back(node.id);
    }
    std::printf(
        "NUMATIC_GUEST %s online=%s nodes=%s allowed_cpus=%s excluded=%s "
        "rejected=%s\n",
        label_.c_str(),
        ReadFirstLine("/sys/devices/system/node/online").c_str(),
        FormatIdList(topology.node_ids()).c_str(),
        FormatIdList(topology.allowed_cpus()).c_str(),
        FormatIdList(excluded).c_str(), Rejection().c_str());
    // What a server logs at start-up (Topology::Summary()).
    std::printf("NUMATIC_GUEST %s summary=%s\n", label_.c_str(),
                topology.Summary().c_str());
    for (const NodeInfo& node : topology.nodes()) ProbeNode(node);
    CheckAllOrNothing();
    std::printf("NUMATIC_GUEST_RESULT %s failures=%d\n", label_.c_str(),
                failures_);
    std::fflush(stdout);
    return failures_ == 0 ? 0 : 1;
  }

 private:
  void Fail(const std::string& what) {
    ++failures_;
    std::printf("NUMATIC_GUEST_FAILURE %s %s\n", label_.c_str(), what.c_str());
  }

  // Allocating on a node outside the topology must be kNoSuchNode: the
  // first excluded node if there is one, else one past the last node.
  std::string Rejection() {
    const Topology& topology = numatic_.topology();
    const int node = topology.excluded_nodes().empty()
                         ? topology.nodes().back().id + 1
                         : topology.excluded_nodes().front().id;
    absl::StatusOr<NumaBlock> block = numatic_.AllocateOnNode(4096, node);
    if (block.ok()) {
      numatic_.Free(*block);
      Fail(absl::StrCat("allocation on node ", node, " succeeded"));
      return absl::StrCat(node, ":OK");
    }
    return absl::StrCat(node, ":",
                        std::string(ErrorName(ErrorOf(block.status()))));
  }

  // Writes every byte of `block` from a thread pinned to the node after
  // `k` (k itself on a one-node topology).
  void WriteFromAnotherNode(const NumaBlock& block, int k) {
    const std::vector<int> ids = numatic_.topology().node_ids();
    const int other =
        ids[(std::find(ids.begin(), ids.end(), k) - ids.begin() + 1) %
            ids.size()];
    std::thread([&] {
      if (!numatic_.PinCurrentThreadToNode(other).ok()) {
        Fail(absl::StrCat("cannot pin to node ", other));
      }
      std::memset(block.data, 0x5a, block.size);
    }).join();
  }

  void ProbeNode(const NodeInfo& node) {
    const int k = node.id;
    std::string memory = "error";
    absl::StatusOr<NumaBlock> block = numatic_.AllocateOnNode(kBlockBytes, k);
    if (block.ok()) {
      // A block is bound, not faulted in (numatic.h): its first write comes
      // from a thread pinned to another node, so only the binding policy
      // can put the pages on node k.
      WriteFromAnotherNode(*block, k);
      memory = NodeOfAllPages(*block);
    } else {
      Fail(block.status().ToString());
    }
    if (memory != absl::StrCat(k)) {
      Fail(absl::StrCat("memory for node ", k, " is on ", memory));
    }

    std::string huge = "error";
    absl::StatusOr<NumaBlock> huge_block = numatic_.AllocateOnNodeHuge(1, k);
    if (huge_block.ok()) {
      const std::string where = NodeOfAllPages(*huge_block);
      huge = absl::StrCat(PageKindName(huge_block->pages), "@", where);
      if (where != absl::StrCat(k)) Fail("huge block misplaced: " + huge);
      numatic_.Free(*huge_block);
    } else {
      Fail(huge_block.status().ToString());
    }

    // The engine's value pages, key table and ARC arrays (node_shard.cc):
    // advised for transparent huge pages, and still bound before the first
    // touch, which comes from another node's CPU.
    std::string thp = "error";
    absl::StatusOr<NumaBlock> thp_block = numatic_.AllocateOnNodeTransparentHuge(
        2 * GetHugePageSize() + GetPageSize(), k);
    if (thp_block.ok()) {
      WriteFromAnotherNode(*thp_block, k);
      const std::string where = NodeOfAllPages(*thp_block);
      thp = absl::StrCat(PageKindName(thp_block->pages), "@", where);
      if (where != absl::StrCat(k)) Fail("THP block misplaced: " + thp);
      numatic_.Free(*thp_block);
    } else {
      Fail(thp_block.status().ToString());
    }

    std::string pmr = "error";
    absl::StatusOr<NumaNodeMemoryResource*> resource = numatic_.NodeResource(k);
    if (resource.ok()) {
      std::pmr::vector<int> values(100000, 7, *resource);
      absl::StatusOr<int> where = GetPageNode(values.data());
      pmr = where.ok() ? absl::StrCat(*where) : "error";
    }
    if (pmr != absl::StrCat(k)) Fail("pmr vector on " + pmr);

    int cached = -1;
    int uncached = -1;
    bool cpu_in_node = false;
    std::thread([&] {
      if (!numatic_.PinCurrentThreadToNode(k).ok()) return;
      cached = numatic_.GetCurrentNode();
      uncached = numatic_.GetCurrentNodeUncached();
      const int cpu = sched_getcpu();
      cpu_in_node =
          std::find(node.cpus.begin(), node.cpus.end(), cpu) != node.cpus.end();
    }).join();
    if (cached != k || uncached != k || !cpu_in_node) {
      Fail(absl::StrCat("pinned to ", k, ": cached ", cached, " uncached ",
                        uncached, cpu_in_node ? "" : ", CPU outside node"));
    }

    // Migrate the first block to the next node and ask where it went.
    std::string moved = "error";
    if (block.ok()) {
      const std::vector<int> ids = numatic_.topology().node_ids();
      const int target =
          ids[(std::find(ids.begin(), ids.end(), k) - ids.begin() + 1) %
              ids.size()];
      std::vector<void*> pages;
      for (size_t offset = 0; offset < block->size;
           offset += GetPageSize()) {
        pages.push_back(static_cast<char*>(block->data) + offset);
      }
      absl::StatusOr<std::vector<int>> result =
          numatic_.MovePages(pages, target);
      if (result.ok()) {
        moved = NodeOfAllPages(*block);
        if (moved != absl::StrCat(target)) {
          Fail(absl::StrCat("pages moved to ", target, " are on ", moved));
        }
      } else {
        Fail(result.status().ToString());
      }
      numatic_.Free(*block);
    }

    std::printf(
        "NUMATIC_GUEST %s node=%d cpus=%s distances=%s memory=%s huge=%s "
        "thp=%s pmr=%s pinned=%d/%d moved=%s\n",
        label_.c_str(), k, FormatIdList(node.cpus).c_str(),
        absl::StrJoin(node.distances, ",").c_str(), memory.c_str(),
        huge.c_str(), thp.c_str(), pmr.c_str(), cached, uncached,
        moved.c_str());
  }

  void CheckAllOrNothing() {
    const std::vector<int> ids = numatic_.topology().node_ids();
    absl::StatusOr<std::vector<NumaBlock>> blocks =
        numatic_.AllocateOnEachNode(1 << 20, ids);
    if (!blocks.ok()) {
      Fail(blocks.status().ToString());
      return;
    }
    for (size_t i = 0; i < ids.size(); ++i) {
      WriteFromAnotherNode((*blocks)[i], ids[i]);
      const std::string where = NodeOfAllPages((*blocks)[i]);
      if (where != absl::StrCat(ids[i])) {
        Fail(absl::StrCat("all-or-nothing block for ", ids[i], " on ", where));
      }
      numatic_.Free((*blocks)[i]);
    }
  }

  const std::string label_;
  const Numatic& numatic_;
  int failures_ = 0;
};

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) {
  std::string label = "probe";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--label=", 8) == 0) label = argv[i] + 8;
  }
  absl::StatusOr<std::unique_ptr<furrballs::Numatic>> numatic =
      furrballs::Numatic::Create(furrballs::NumaticOptions{});
  if (!numatic.ok()) {
    std::printf("NUMATIC_GUEST_RESULT %s failures=1 error=%s\n", label.c_str(),
                numatic.status().ToString().c_str());
    return 1;
  }
  return furrballs::Probe(label, **numatic).Run();
}
