// engine/numatic/numatic.h: Numatic, the platform layer that places memory
// and threads on NUMA nodes (report §2.6, §3.1, §3.2, §3.4, §3.15, §5.1).
//
// Thread safety: a Numatic is immutable after construction and every method
// is safe to call from any thread. NumaNodeMemoryResource is thread-safe.
// The free functions are thread-safe.
//
// Numatic is the only code in Furrballs that talks to libnuma. Everything
// above it (pages, CMap, ARC, NodeJob) is topology-blind and asks Numatic
// for node-placed memory, pinned threads and the current node.
//
// Real and simulated topologies (see topology.h) behave differently, and
// the difference is deliberate:
//
//                       real topology               simulated topology
//   AllocateOnNode(k)   mmap + mbind(MPOL_BIND, k): mmap, placed by first
//                       a page comes from node k    touch (the thread's node)
//                       whoever touches it first
//   PinCurrentThread    node k's allowed CPUs       virtual node k's CPUs
//   GetCurrentNode      node of the CPU             pinned node, else the
//                                                   lowest node with the CPU
//   MovePages           migrates pages              kInvalidTopology
//
// Simulation exercises every multi-node code path; it cannot show where
// memory really is. Placement is proven on a real multi-node kernel: the
// QEMU guest test in tests/numa_guest/ allocates on each node and checks the
// page's node with GetPageNode (move_pages(2) in query mode).
//
// Memory is mapped and bound, but not faulted in: a page enters the RSS
// when it is first written, and on a real topology the binding policy puts
// it on its node whichever thread writes it (tests/numa_guest touches a
// block from another node's CPU and checks the page's node). So a cache's
// budget is a bound, not a reservation, and an idle cache is small. The
// price is a first-touch fault on the request path for each 4 KiB page the
// first time it is used. Hugetlb blocks are the exception: they are faulted
// at allocation, because a pool short of pages on the node would otherwise
// raise SIGBUS later. Every block is zero-filled, at least one page and page
// aligned (hence also kCacheLineSize aligned); it is meant for the few
// large, long-lived allocations the engine makes at start-up (report §3.1).
//
// GetCurrentNode (report §3.15): a thread_local cache remembers the node of
// the calling thread, because sched_getcpu costs a VM exit (~1 µs) under
// virtualization. PinCurrentThreadToNode writes the cache, so a pinned
// thread (every NodeJob worker) always reads its exact node. An unpinned
// thread caches the node it first ran on, which goes stale if the scheduler
// moves it; that is acceptable for a routing hint, and
// GetCurrentNodeUncached exists for callers that need the truth. The cache
// is tagged with the Numatic that filled it, so several Numatic instances
// (tests build many) never read each other's entries.
#ifndef FURRBALLS_ENGINE_NUMATIC_NUMATIC_H_
#define FURRBALLS_ENGINE_NUMATIC_NUMATIC_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <memory_resource>
#include <span>
#include <string>
#include <vector>

#include <absl/base/optimization.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>

#include "engine/common/raw_allocator.h"
#include "engine/numatic/error_status.h"
#include "engine/numatic/topology.h"

namespace furrballs {

struct NumaticOptions {
  // 0 uses the machine's real topology; N > 0 simulates N virtual nodes over
  // the allowed CPUs (see topology.h).
  int simulate_nodes = 0;
  // Distance between different virtual nodes when simulating.
  int simulated_remote_distance = kDefaultRemoteDistance;
  // The virtual nodes' ids when simulating (SimulationOptions::ids); empty:
  // 0..simulate_nodes-1.
  std::vector<int> simulated_node_ids;
  // Busy-wait that SimulateRemoteAccess injects between different nodes, in
  // nanoseconds (the report's SIMULATE_NUMA_LATENCY_NS, §5.1: ~70 for Intel
  // cross-socket, ~50 for AMD Milan). 0 disables it. It applies to real
  // topologies too, because a QEMU guest has real nodes but no remote cost.
  uint64_t remote_access_delay_ns = 0;
};

// Which kind of page backs a NumaBlock.
enum class PageKind : uint8_t {
  kBase,             // the base page size (4 KiB on x86-64)
  kHugeTlb,          // explicit huge pages from the hugetlb pool
  kTransparentHuge,  // base mapping aligned and advised MADV_HUGEPAGE; the
                     // kernel backs it with huge pages when it can
};

// Transparent huge pages for the engine's big structures (issue 13, goal 7).
// The value pages, the key table and ARC's arrays are read at random: at a
// 64 MiB budget that is ~16k base pages, far more than the TLB holds, and in
// a VM each TLB miss walks two page tables. A block of at least one huge
// page asked for with PageKind::kTransparentHuge is aligned to the huge page
// size and advised MADV_HUGEPAGE (before its first touch, like the binding),
// so each aligned 2 MiB of it is one TLB entry once the kernel backs it with
// a huge page. Nothing else changes: the size is not rounded up (the tail
// past the last whole huge page stays base pages), nothing is pre-faulted
// (a huge page enters the RSS when a byte of it is first written), and the
// binding policy places huge pages as it places base pages. Where THP is
// "never" the advice is ignored and the block is base pages. What it costs
// is granularity: the first write into an aligned 2 MiB brings in all of it,
// and MADV_DONTNEED of part of a huge page (RawAllocator::
// ReleaseMappedPages) splits it, so only structures used densely, or given
// back in whole huge pages, should ask for it (docs/numatic.md).

// A block of node-placed memory. Return it with Numatic::Free.
struct NumaBlock {
  void* data = nullptr;
  size_t size = 0;  // bytes mapped: the request rounded up to the page size
  int node = -1;    // the node it was placed for
  PageKind pages = PageKind::kBase;
};

class Numatic;

// A std::pmr::memory_resource whose allocations are placed on one node
// (report §3.2: PMR-backed per-node containers). Obtain one from
// Numatic::NodeResource; it lives as long as its Numatic.
//
// Each allocation is its own page-aligned mapping, so alignment up to the
// page size is free and larger alignments are honoured too. That suits the
// long-lived containers built at start-up; for many small objects, put a
// std::pmr::monotonic_buffer_resource or unsynchronized_pool_resource on top.
// As the PMR contract requires, allocate throws std::bad_alloc on failure;
// AllocateOrNull is the non-throwing form.
class NumaNodeMemoryResource final : public std::pmr::memory_resource {
 public:
  NumaNodeMemoryResource(const NumaNodeMemoryResource&) = delete;
  NumaNodeMemoryResource& operator=(const NumaNodeMemoryResource&) = delete;

  int node() const { return node_; }

  // nullptr on failure; never throws. `pages` is kBase or kTransparentHuge
  // (see PageKind above).
  void* AllocateOrNull(size_t bytes, size_t alignment,
                       PageKind pages = PageKind::kBase) noexcept;
  // REQUIRES: p came from this resource with these bytes.
  void DeallocateBytes(void* p, size_t bytes) noexcept;

 private:
  friend class Numatic;
  NumaNodeMemoryResource(const Numatic* numatic, int node)
      : numatic_(numatic), node_(node) {}

  void* do_allocate(size_t bytes, size_t alignment) override;
  void do_deallocate(void* p, size_t bytes, size_t alignment) override;
  bool do_is_equal(
      const std::pmr::memory_resource& other) const noexcept override;

  const Numatic* const numatic_;
  const int node_;
};

namespace numatic_internal {

// The per-thread GetCurrentNode cache. `owner` is the id of the Numatic that
// filled it (0: empty). Only its own thread touches it, so plain fields.
struct CurrentNodeCache {
  uint64_t owner = 0;
  int node = -1;
};
extern thread_local constinit CurrentNodeCache current_node_cache;

// Busy-waits for `ticks` of the time-stamp counter, or `nanos` of
// steady_clock when the TSC was not usable (ticks == 0).
void SpinFor(uint64_t ticks, uint64_t nanos);

}  // namespace numatic_internal

class Numatic {
 public:
  // Discovers or simulates the topology as `options` say.
  static absl::StatusOr<std::unique_ptr<Numatic>> Create(
      const NumaticOptions& options);

  // A Numatic over an already built topology.
  explicit Numatic(Topology topology, uint64_t remote_access_delay_ns = 0);
  ~Numatic();

  // Not copyable or movable: memory resources and RawAllocator contexts
  // point into it.
  Numatic(const Numatic&) = delete;
  Numatic& operator=(const Numatic&) = delete;

  // ---- Topology ----------------------------------------------------------

  const Topology& topology() const { return topology_; }
  bool IsNUMAAvailable() const { return topology_.numa_available(); }
  int GetNodeCount() const { return topology_.node_count(); }
  // -1 if either node is not in the topology.
  int GetDistance(int from, int to) const {
    return topology_.Distance(from, to);
  }

  // ---- Allocation --------------------------------------------------------
  // All fail with kInvalidArgument for zero bytes, kNoSuchNode for a node
  // outside the topology, kAllocationFailed when the kernel refuses.

  absl::StatusOr<NumaBlock> AllocateOnNode(size_t bytes, int node) const;
  // As AllocateOnNode; a block of at least GetHugePageSize() bytes is aligned
  // to it and advised MADV_HUGEPAGE (see "Transparent huge pages" above).
  // `pages` says whether the advice was given and taken.
  absl::StatusOr<NumaBlock> AllocateOnNodeTransparentHuge(size_t bytes,
                                                          int node) const;
  // On GetCurrentNode().
  absl::StatusOr<NumaBlock> AllocateLocal(size_t bytes) const;
  // Rounded up to GetHugePageSize(). Uses the hugetlb pool when it has pages
  // on the node, else a THP-advised mapping; `pages` says which.
  absl::StatusOr<NumaBlock> AllocateOnNodeHuge(size_t bytes, int node) const;
  absl::StatusOr<NumaBlock> AllocateLocalHuge(size_t bytes) const;

  // All-or-nothing (report §3.4): one block of `bytes` on each of `nodes`,
  // in order. If any allocation fails, the blocks already obtained are freed
  // and the error names the node that failed.
  absl::StatusOr<std::vector<NumaBlock>> AllocateOnEachNode(
      size_t bytes, std::span<const int> nodes) const;

  // REQUIRES: `block` came from this Numatic and is freed once.
  void Free(const NumaBlock& block) const;

  // Bytes currently mapped through this Numatic for `node` (0 for a node not
  // in the topology). Cheap; meant for statistics and tests.
  uint64_t MappedBytes(int node) const;
  // Bytes currently mapped by every Numatic of the process (tests: what a
  // failed start-up left behind).
  static uint64_t ProcessMappedBytes();

  // ---- Threads -----------------------------------------------------------

  // Restricts the calling thread to the node's allowed CPUs and records the
  // node in the GetCurrentNode cache. kNoSuchNode for an unknown node,
  // kInvalidTopology if the kernel refuses (the cpuset shrank).
  absl::Status PinCurrentThreadToNode(int node) const;

  // The calling thread's node, from the thread_local cache (see the top of
  // this file). Always a node of the topology.
  int GetCurrentNode() const {
    const numatic_internal::CurrentNodeCache& cache =
        numatic_internal::current_node_cache;
    if (ABSL_PREDICT_TRUE(cache.owner == id_)) return cache.node;
    return RefreshCurrentNode();
  }
  // The node of the CPU the thread runs on now (sched_getcpu). With virtual
  // nodes sharing a CPU, the lowest such node. A CPU outside the topology
  // (the affinity changed after discovery) maps to the first node.
  int GetCurrentNodeUncached() const;

  // ---- Simulated remote latency (report §5.1) ----------------------------

  // Models the cost of touching memory on `to` from `from`: busy-waits
  // remote_access_delay_ns() when the nodes differ and the delay is
  // non-zero. Returns whether it waited. When the delay is off this is one
  // predictable branch.
  bool SimulateRemoteAccess(int from, int to) const {
    if (ABSL_PREDICT_TRUE(remote_delay_ns_ == 0) || from == to) return false;
    numatic_internal::SpinFor(remote_delay_ticks_, remote_delay_ns_);
    return true;
  }
  uint64_t remote_access_delay_ns() const { return remote_delay_ns_; }

  // ---- Migration ---------------------------------------------------------

  // Migrates the pages containing `pages` to `node` with move_pages(2).
  // Returns one entry per page: its node afterwards, or a negative errno as
  // the kernel reports it (-ENOENT: never touched). The mapping's binding
  // policy is not changed. kInvalidTopology on a simulated topology, where
  // virtual nodes are not kernel nodes.
  absl::StatusOr<std::vector<int>> MovePages(std::span<void* const> pages,
                                             int node) const;

  // ---- PMR and RawAllocator (report §2.7.7, §3.2) ------------------------

  // The memory resource of `node`, owned by this Numatic.
  absl::StatusOr<NumaNodeMemoryResource*> NodeResource(int node) const;
  // A RawAllocator placing memory on `node`. Its context is the node's
  // NumaNodeMemoryResource, so it is valid as long as this Numatic. Its
  // allocations come zeroed, and Release gives their pages back
  // (RawAllocator::ReleaseMappedPages; a page touched again is placed on
  // `node` by the mapping's policy). With `pages` kTransparentHuge its
  // allocations are AllocateOnNodeTransparentHuge's; kHugeTlb is
  // kInvalidArgument (a pool's pages cannot be given back one at a time).
  absl::StatusOr<RawAllocator> NodeAllocator(
      int node, PageKind pages = PageKind::kBase) const;

 private:
  friend class NumaNodeMemoryResource;

  // Index of `node` in topology_.nodes(), or -1.
  int IndexOf(int node) const;
  int RefreshCurrentNode() const;
  // Maps and binds; the common path of every allocation. `pages`: kBase,
  // kTransparentHuge (advised, see PageKind), or kHugeTlb for
  // AllocateOnNodeHuge (the pool first, else a THP block rounded up to
  // whole huge pages).
  absl::StatusOr<NumaBlock> Map(size_t bytes, size_t alignment, int node,
                                PageKind pages) const;
  void Unmap(void* data, size_t size, int node) const;

  const Topology topology_;
  const uint64_t id_;           // tags this instance's current_node_cache
  const bool bind_memory_;      // real topology with NUMA: mbind each block
  const uint64_t remote_delay_ns_;
  uint64_t remote_delay_ticks_ = 0;  // TSC ticks for remote_delay_ns_
  std::vector<int> cpu_to_node_;     // indexed by CPU; -1: not in topology
  // Per node index. Allocation happens at start-up, never on the request
  // path, so one shared relaxed counter per node costs nothing that matters.
  std::unique_ptr<std::atomic<uint64_t>[]> mapped_bytes_;
  std::vector<std::unique_ptr<NumaNodeMemoryResource>> resources_;
};

// ---- Kernel queries that need no topology --------------------------------

// The node holding the page that contains `p`, from move_pages(2) in query
// mode (nodes == NULL). kInvalidArgument if the page is not mapped or was
// never touched, or if the system call is refused (a container without
// CAP_SYS_NICE); on a kernel without NUMA every page is on node 0. On a simulated topology this is the real node (0 on a
// one-node machine), never a virtual one.
absl::StatusOr<int> GetPageNode(const void* p);
// The same for many pages: one entry each, a node or a negative errno.
absl::StatusOr<std::vector<int>> QueryPageNodes(
    std::span<const void* const> pages);

// The base page size.
size_t GetPageSize();
// The default huge page size (Hugepagesize in /proc/meminfo; 2 MiB if it
// cannot be read).
size_t GetHugePageSize();

struct HugePageInfo {
  size_t page_size = 0;              // GetHugePageSize()
  uint64_t hugetlb_free_pages = 0;   // free pages in the default pool
  std::string transparent_mode;      // "always", "madvise", "never" or ""
};
HugePageInfo GetHugePageInfo();
// True if huge pages can be had: the hugetlb pool has free pages or
// transparent huge pages are not "never".
bool IsHugePagesAvailable();

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_NUMATIC_NUMATIC_H_
