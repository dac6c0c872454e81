#include "engine/numatic/numatic.h"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <new>
#include <string>
#include <utility>

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <absl/base/config.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>

#include "engine/common/error.h"

// Linux 5.14 added MADV_POPULATE_WRITE; define it for older headers. On an
// older kernel madvise fails with EINVAL and the hugetlb pool is not used.
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#ifdef ABSL_HAVE_LEAK_SANITIZER
#include <sanitizer/lsan_interface.h>
#endif

namespace furrballs {
namespace numatic_internal {

thread_local constinit CurrentNodeCache current_node_cache;

void SpinFor(uint64_t ticks, uint64_t nanos) {
#if defined(__x86_64__)
  if (ticks != 0) {
    // No pause instruction in the loop: on recent Intel cores one pause is
    // ~40 ns, too coarse for delays of 50-100 ns.
    const uint64_t start = __rdtsc();
    while (__rdtsc() - start < ticks) {
    }
    return;
  }
#endif
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::nanoseconds(nanos);
  while (std::chrono::steady_clock::now() < deadline) {
  }
}

}  // namespace numatic_internal

namespace {

// Numatic::ProcessMappedBytes.
std::atomic<uint64_t> process_mapped_bytes{0};

// Instance ids start at 1 because 0 marks an empty cache.
std::atomic<uint64_t> next_numatic_id{1};

size_t RoundUp(size_t value, size_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// Requests beyond this cannot be rounded up without overflow; no kernel
// maps them anyway.
constexpr size_t kMaxRequestBytes = std::numeric_limits<size_t>::max() / 4;

// Converts `delay_ns` into time-stamp-counter ticks by timing the TSC against
// steady_clock for a millisecond. Returns 0 (use steady_clock instead) when
// the TSC is unavailable or the rate looks wrong.
uint64_t CalibrateDelayTicks(uint64_t delay_ns) {
#if defined(__x86_64__)
  using Clock = std::chrono::steady_clock;
  const Clock::time_point t0 = Clock::now();
  const uint64_t c0 = __rdtsc();
  while (Clock::now() - t0 < std::chrono::milliseconds(1)) {
  }
  const uint64_t c1 = __rdtsc();
  const Clock::time_point t1 = Clock::now();
  const double nanos =
      std::chrono::duration<double, std::nano>(t1 - t0).count();
  const double ticks_per_ns = static_cast<double>(c1 - c0) / nanos;
  // Real TSCs tick at 0.5-6 GHz; anything far outside means a broken or
  // virtualized counter that cannot be trusted.
  if (ticks_per_ns > 0.1 && ticks_per_ns < 100.0) {
    return static_cast<uint64_t>(
        std::ceil(static_cast<double>(delay_ns) * ticks_per_ns));
  }
#endif
  return 0;
}

// Maps `size` bytes aligned to `alignment` (a power of two). Alignments above
// the page size over-map by `alignment` and trim both ends, so the result is
// exactly [p, p + size) and munmap(p, size) releases all of it.
void* MapAligned(size_t size, size_t alignment, int extra_flags) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | extra_flags;
  if (alignment <= GetPageSize()) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, flags, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  void* raw =
      mmap(nullptr, size + alignment, PROT_READ | PROT_WRITE, flags, -1, 0);
  if (raw == MAP_FAILED) return nullptr;
  const uintptr_t start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = RoundUp(start, alignment);
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + size + alignment;
  if (end > aligned + size) {
    munmap(reinterpret_cast<void*>(aligned + size), end - (aligned + size));
  }
  return reinterpret_cast<void*>(aligned);
}

// Sets an MPOL_BIND policy to `node` on [p, p + size) before any page is
// faulted in, so every page of the range comes from that node.
absl::Status BindToNode(void* p, size_t size, int node) {
  struct bitmask* mask = numa_allocate_nodemask();
  numa_bitmask_setbit(mask, static_cast<unsigned int>(node));
  // maxnode is size + 1: the kernel reads one bit fewer than it is told,
  // a historical off-by-one that libnuma compensates for the same way.
  const long rc = mbind(p, size, MPOL_BIND, mask->maskp, mask->size + 1, 0);
  const int err = errno;
  numa_free_nodemask(mask);
  if (rc != 0) {
    return ErrorStatus(Error::kAllocationFailed,
                       absl::StrCat("mbind(MPOL_BIND) of ", size,
                                    " bytes to node ", node,
                                    " failed: ", strerror(err)));
  }
  return absl::OkStatus();
}

// Faults every page of a hugetlb mapping in, so that a pool short of pages
// on this node is an error now (MADV_POPULATE_WRITE reports it) rather than
// a SIGBUS on the request path. Base pages are never pre-faulted (see Map).
absl::Status PopulateHugeTlb(void* p, size_t size, int node) {
  if (madvise(p, size, MADV_POPULATE_WRITE) == 0) return absl::OkStatus();
  const int err = errno;
  return ErrorStatus(Error::kAllocationFailed,
                     absl::StrCat("pre-faulting ", size, " bytes on node ",
                                  node, " failed: ", strerror(err)));
}

absl::StatusOr<std::vector<int>> QueryPages(std::vector<void*> pages) {
  std::vector<int> status(pages.size(), -EFAULT);
  if (pages.empty()) return status;
  const long rc = move_pages(0, static_cast<unsigned long>(pages.size()),
                             pages.data(), nullptr, status.data(), 0);
  if (rc != 0) {
    if (errno == ENOSYS) {
      // A kernel without NUMA: every page is on node 0.
      std::fill(status.begin(), status.end(), 0);
      return status;
    }
    return ErrorStatus(
        Error::kInvalidArgument,
        absl::StrCat("move_pages query failed: ", strerror(errno)));
  }
  return status;
}

void* PageOf(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<void*>(address & ~(uintptr_t{GetPageSize()} - 1));
}

// The value after `key` in a "Key:   value unit" file such as /proc/meminfo.
bool ReadMeminfoField(std::string_view key, uint64_t* value) {
  std::ifstream in("/proc/meminfo");
  std::string name;
  std::string number;
  std::string rest;
  while (in >> name >> number) {
    std::getline(in, rest);
    if (name.size() == key.size() + 1 && name.compare(0, key.size(), key) == 0)
      return absl::SimpleAtoi(number, value);
  }
  return false;
}

}  // namespace

// ---- NumaNodeMemoryResource ----------------------------------------------

void* NumaNodeMemoryResource::AllocateOrNull(size_t bytes, size_t alignment,
                                             PageKind pages) noexcept {
  if (pages == PageKind::kHugeTlb) return nullptr;
  absl::StatusOr<NumaBlock> block =
      numatic_->Map(std::max<size_t>(bytes, 1),
                    std::max(alignment, kCacheLineSize), node_, pages);
  return block.ok() ? block->data : nullptr;
}

void NumaNodeMemoryResource::DeallocateBytes(void* p, size_t bytes) noexcept {
  numatic_->Unmap(p, RoundUp(std::max<size_t>(bytes, 1), GetPageSize()),
                  node_);
}

void* NumaNodeMemoryResource::do_allocate(size_t bytes, size_t alignment) {
  void* p = AllocateOrNull(bytes, alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void NumaNodeMemoryResource::do_deallocate(void* p, size_t bytes, size_t) {
  DeallocateBytes(p, bytes);
}

bool NumaNodeMemoryResource::do_is_equal(
    const std::pmr::memory_resource& other) const noexcept {
  // A Numatic owns exactly one resource per node, so identity is equality.
  return this == &other;
}

// ---- Numatic --------------------------------------------------------------

absl::StatusOr<std::unique_ptr<Numatic>> Numatic::Create(
    const NumaticOptions& options) {
  if (options.simulate_nodes < 0) {
    return ErrorStatus(Error::kInvalidArgument,
                       absl::StrCat("simulate_nodes must be >= 0, not ",
                                    options.simulate_nodes));
  }
  absl::StatusOr<Topology> topology =
      options.simulate_nodes == 0
          ? Topology::Discover()
          : Topology::Simulate(SimulationOptions{
                options.simulate_nodes, options.simulated_remote_distance,
                options.simulated_node_ids});
  if (!topology.ok()) return topology.status();
  return std::make_unique<Numatic>(*std::move(topology),
                                   options.remote_access_delay_ns);
}

Numatic::Numatic(Topology topology, uint64_t remote_access_delay_ns)
    : topology_(std::move(topology)),
      // Relaxed: the id only has to be unique, it orders nothing.
      id_(next_numatic_id.fetch_add(1, std::memory_order_relaxed)),
      bind_memory_(!topology_.simulated() && topology_.numa_available()),
      remote_delay_ns_(remote_access_delay_ns) {
  if (remote_delay_ns_ != 0) {
    remote_delay_ticks_ = CalibrateDelayTicks(remote_delay_ns_);
  }
  const std::vector<NodeInfo>& nodes = topology_.nodes();
  int max_cpu = -1;
  for (const NodeInfo& node : nodes) {
    for (int cpu : node.cpus) max_cpu = std::max(max_cpu, cpu);
  }
  cpu_to_node_.assign(static_cast<size_t>(max_cpu + 1), -1);
  for (const NodeInfo& node : nodes) {
    for (int cpu : node.cpus) {
      if (cpu_to_node_[cpu] < 0) cpu_to_node_[cpu] = node.id;
    }
  }
  mapped_bytes_ = std::make_unique<std::atomic<uint64_t>[]>(nodes.size());
  for (const NodeInfo& node : nodes) {
    resources_.push_back(std::unique_ptr<NumaNodeMemoryResource>(
        new NumaNodeMemoryResource(this, node.id)));
  }
}

Numatic::~Numatic() = default;

int Numatic::IndexOf(int node) const {
  const std::vector<NodeInfo>& nodes = topology_.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].id == node) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<NumaBlock> Numatic::Map(size_t bytes, size_t alignment,
                                       int node, PageKind pages) const {
  if (bytes == 0) {
    return ErrorStatus(Error::kInvalidArgument, "cannot allocate 0 bytes");
  }
  const int index = IndexOf(node);
  if (index < 0) return topology_.CheckNode(node);
  if (bytes > kMaxRequestBytes) {
    return ErrorStatus(Error::kAllocationFailed,
                       absl::StrCat("cannot allocate ", bytes,
                                    " bytes on node ", node, ": too large"));
  }
  auto bind = [&](void* p, size_t size) {
    return bind_memory_ ? BindToNode(p, size, node) : absl::OkStatus();
  };

  NumaBlock block;
  block.node = node;
  if (pages == PageKind::kHugeTlb) {
    const size_t huge_size = GetHugePageSize();
    block.size = RoundUp(bytes, huge_size);
    // The hugetlb pool first. Its pages are reserved globally but faulted
    // per node, so the pool may still lack pages on this node: populate
    // says so with an error, and we fall back to THP.
    // The kernel aligns hugetlb mappings itself, so no over-mapping.
    void* p = MapAligned(block.size, GetPageSize(), MAP_HUGETLB);
    if (p != nullptr) {
      if (bind(p, block.size).ok() &&
          PopulateHugeTlb(p, block.size, node).ok()) {
        block.data = p;
        block.pages = PageKind::kHugeTlb;
      } else {
        munmap(p, block.size);
      }
    }
    if (block.data == nullptr) {
      p = MapAligned(block.size, huge_size, 0);
      if (p == nullptr) {
        return ErrorStatus(
            Error::kAllocationFailed,
            absl::StrCat("mmap of ", block.size, " bytes for node ", node,
                         " failed: ", strerror(errno)));
      }
      // Advice only: with THP set to "never" this fails and the block is
      // simply made of base pages.
      madvise(p, block.size, MADV_HUGEPAGE);
      block.data = p;
      block.pages = PageKind::kTransparentHuge;
    }
  } else {
    block.size = RoundUp(bytes, GetPageSize());
    // Only a block that holds a whole huge page can have one.
    const bool advise = pages == PageKind::kTransparentHuge &&
                        block.size >= GetHugePageSize();
    block.data = MapAligned(
        block.size, advise ? std::max(alignment, GetHugePageSize()) : alignment,
        0);
    if (block.data == nullptr) {
      return ErrorStatus(
          Error::kAllocationFailed,
          absl::StrCat("mmap of ", block.size, " bytes for node ", node,
                       " failed: ", strerror(errno)));
    }
    // Advice only, given before the first touch as the binding is: where
    // THP is "never" (or not built) the block simply stays base pages.
    if (advise && madvise(block.data, block.size, MADV_HUGEPAGE) == 0) {
      block.pages = PageKind::kTransparentHuge;
    }
  }
  if (block.pages != PageKind::kHugeTlb) {
    // Bound, not faulted: the policy makes whichever thread touches a page
    // first take it from `node`, and memory the cache never uses never
    // enters the RSS (the budget is an upper bound, not a reservation).
    absl::Status status = bind(block.data, block.size);
    if (!status.ok()) {
      munmap(block.data, block.size);
      return status;
    }
  }
#ifdef ABSL_HAVE_LEAK_SANITIZER
  // LeakSanitizer looks for pointers in the heap, globals, stacks and TLS,
  // not in mappings: without this, whatever only node memory points at (a
  // shard placed in node memory owns its ARC, tables and buffers from the
  // heap) is reported as leaked by any leak check made while the cache is
  // alive, as libFuzzer makes them.
  __lsan_register_root_region(block.data, block.size);
#endif
  // Relaxed: a statistic; no other memory is published through it.
  mapped_bytes_[index].fetch_add(block.size, std::memory_order_relaxed);
  process_mapped_bytes.fetch_add(block.size, std::memory_order_relaxed);
  return block;
}

void Numatic::Unmap(void* data, size_t size, int node) const {
  if (data == nullptr) return;
#ifdef ABSL_HAVE_LEAK_SANITIZER
  __lsan_unregister_root_region(data, size);
#endif
  munmap(data, size);
  process_mapped_bytes.fetch_sub(size, std::memory_order_relaxed);
  const int index = IndexOf(node);
  if (index >= 0) {
    mapped_bytes_[index].fetch_sub(size, std::memory_order_relaxed);
  }
}

absl::StatusOr<NumaBlock> Numatic::AllocateOnNode(size_t bytes,
                                                  int node) const {
  return Map(bytes, kCacheLineSize, node, PageKind::kBase);
}

absl::StatusOr<NumaBlock> Numatic::AllocateOnNodeTransparentHuge(
    size_t bytes, int node) const {
  return Map(bytes, kCacheLineSize, node, PageKind::kTransparentHuge);
}

absl::StatusOr<NumaBlock> Numatic::AllocateLocal(size_t bytes) const {
  return AllocateOnNode(bytes, GetCurrentNode());
}

absl::StatusOr<NumaBlock> Numatic::AllocateOnNodeHuge(size_t bytes,
                                                      int node) const {
  return Map(bytes, kCacheLineSize, node, PageKind::kHugeTlb);
}

absl::StatusOr<NumaBlock> Numatic::AllocateLocalHuge(size_t bytes) const {
  return AllocateOnNodeHuge(bytes, GetCurrentNode());
}

absl::StatusOr<std::vector<NumaBlock>> Numatic::AllocateOnEachNode(
    size_t bytes, std::span<const int> nodes) const {
  std::vector<NumaBlock> blocks;
  blocks.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    absl::StatusOr<NumaBlock> block = AllocateOnNode(bytes, nodes[i]);
    if (!block.ok()) {
      for (const NumaBlock& obtained : blocks) Free(obtained);
      return ErrorStatus(
          ErrorOf(block.status()),
          absl::StrCat("allocating ", bytes, " bytes on each of nodes ",
                       FormatIdList(nodes), " failed at node ", nodes[i],
                       " (", i + 1, " of ", nodes.size(), "); freed the ",
                       blocks.size(), " block(s) already allocated: ",
                       block.status().message()));
    }
    blocks.push_back(*block);
  }
  return blocks;
}

void Numatic::Free(const NumaBlock& block) const {
  Unmap(block.data, block.size, block.node);
}

uint64_t Numatic::MappedBytes(int node) const {
  const int index = IndexOf(node);
  return index < 0 ? 0
                   : mapped_bytes_[index].load(std::memory_order_relaxed);
}

uint64_t Numatic::ProcessMappedBytes() {
  return process_mapped_bytes.load(std::memory_order_relaxed);
}

absl::Status Numatic::PinCurrentThreadToNode(int node) const {
  const NodeInfo* info = topology_.FindNode(node);
  if (info == nullptr) return topology_.CheckNode(node);
  const int capacity = static_cast<int>(cpu_to_node_.size());
  cpu_set_t* set = CPU_ALLOC(capacity);
  if (set == nullptr) {
    return ErrorStatus(Error::kAllocationFailed, "CPU_ALLOC failed");
  }
  const size_t set_bytes = CPU_ALLOC_SIZE(capacity);
  CPU_ZERO_S(set_bytes, set);
  for (int cpu : info->cpus) CPU_SET_S(cpu, set_bytes, set);
  const int rc = sched_setaffinity(0, set_bytes, set);
  const int err = errno;
  CPU_FREE(set);
  if (rc != 0) {
    return ErrorStatus(
        Error::kInvalidTopology,
        absl::StrCat("pinning to node ", node, " (CPUs ",
                     FormatIdList(info->cpus), ") failed: ", strerror(err),
                     "; did the cpuset change after discovery?"));
  }
  numatic_internal::current_node_cache = {id_, node};
  return absl::OkStatus();
}

int Numatic::GetCurrentNodeUncached() const {
  const int cpu = sched_getcpu();
  if (cpu >= 0 && static_cast<size_t>(cpu) < cpu_to_node_.size() &&
      cpu_to_node_[cpu] >= 0) {
    return cpu_to_node_[cpu];
  }
  return topology_.nodes().front().id;
}

int Numatic::RefreshCurrentNode() const {
  const int node = GetCurrentNodeUncached();
  numatic_internal::current_node_cache = {id_, node};
  return node;
}

absl::StatusOr<std::vector<int>> Numatic::MovePages(
    std::span<void* const> pages, int node) const {
  if (topology_.simulated()) {
    return ErrorStatus(
        Error::kInvalidTopology,
        absl::StrCat("cannot move pages to virtual node ", node,
                     ": a simulated topology has no kernel nodes to move to"));
  }
  absl::Status status = topology_.CheckNode(node);
  if (!status.ok()) return status;
  std::vector<void*> aligned;
  aligned.reserve(pages.size());
  for (void* p : pages) aligned.push_back(PageOf(p));
  if (!bind_memory_) return QueryPages(std::move(aligned));  // one node only

  std::vector<int> targets(aligned.size(), node);
  std::vector<int> result(aligned.size(), -EFAULT);
  if (aligned.empty()) return result;
  const long rc =
      move_pages(0, static_cast<unsigned long>(aligned.size()), aligned.data(),
                 targets.data(), result.data(), MPOL_MF_MOVE);
  // rc > 0 counts pages that were not moved; `result` says why for each.
  if (rc < 0) {
    const int err = errno;
    return ErrorStatus(
        err == ENOMEM ? Error::kAllocationFailed : Error::kInvalidArgument,
        absl::StrCat("move_pages of ", aligned.size(), " page(s) to node ",
                     node, " failed: ", strerror(err)));
  }
  return result;
}

absl::StatusOr<NumaNodeMemoryResource*> Numatic::NodeResource(
    int node) const {
  const int index = IndexOf(node);
  if (index < 0) return topology_.CheckNode(node);
  return resources_[index].get();
}

absl::StatusOr<RawAllocator> Numatic::NodeAllocator(int node,
                                                    PageKind pages) const {
  absl::StatusOr<NumaNodeMemoryResource*> resource = NodeResource(node);
  if (!resource.ok()) return resource.status();
  if (pages == PageKind::kHugeTlb) {
    return ErrorStatus(Error::kInvalidArgument,
                       "a NodeAllocator cannot use hugetlb pages: they "
                       "cannot be given back one page at a time");
  }
  // Two functions rather than a captured kind: a RawAllocator carries only
  // its context, the node's resource.
  RawAllocator::AllocateFn allocate = [](void* context, size_t bytes) -> void* {
    return static_cast<NumaNodeMemoryResource*>(context)->AllocateOrNull(
        bytes, kCacheLineSize);
  };
  if (pages == PageKind::kTransparentHuge) {
    allocate = [](void* context, size_t bytes) -> void* {
      return static_cast<NumaNodeMemoryResource*>(context)->AllocateOrNull(
          bytes, kCacheLineSize, PageKind::kTransparentHuge);
    };
  }
  return RawAllocator{
      allocate,
      [](void* context, void* p, size_t bytes) {
        static_cast<NumaNodeMemoryResource*>(context)->DeallocateBytes(p,
                                                                       bytes);
      },
      *resource,
      // Every allocation is a fresh private anonymous mapping (Map), so it
      // comes zeroed and its pages can be given back (a huge page is split
      // first when only part of it is).
      /*zeroed=*/true, RawAllocator::ReleaseMappedPages};
}

// ---- Free functions -------------------------------------------------------

absl::StatusOr<std::vector<int>> QueryPageNodes(
    std::span<const void* const> pages) {
  std::vector<void*> aligned;
  aligned.reserve(pages.size());
  for (const void* p : pages) aligned.push_back(PageOf(p));
  return QueryPages(std::move(aligned));
}

absl::StatusOr<int> GetPageNode(const void* p) {
  const void* const pages[] = {p};
  absl::StatusOr<std::vector<int>> nodes = QueryPageNodes(pages);
  if (!nodes.ok()) return nodes.status();
  const int node = (*nodes)[0];
  if (node < 0) {
    return ErrorStatus(
        Error::kInvalidArgument,
        absl::StrFormat("the page at %p has no node: %s", PageOf(p),
                        node == -ENOENT ? "it was never touched"
                                        : strerror(-node)));
  }
  return node;
}

size_t GetPageSize() {
  static const size_t page_size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page_size;
}

size_t GetHugePageSize() {
  static const size_t huge_page_size = [] {
    uint64_t kib = 0;
    if (ReadMeminfoField("Hugepagesize", &kib) && kib > 0) {
      return static_cast<size_t>(kib) * 1024;
    }
    return size_t{2} << 20;
  }();
  return huge_page_size;
}

HugePageInfo GetHugePageInfo() {
  HugePageInfo info;
  info.page_size = GetHugePageSize();
  ReadMeminfoField("HugePages_Free", &info.hugetlb_free_pages);
  // The file reads e.g. "always [madvise] never"; brackets mark the mode.
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string line;
  if (std::getline(in, line)) {
    const size_t open = line.find('[');
    const size_t close = line.find(']', open);
    if (open != std::string::npos && close != std::string::npos) {
      info.transparent_mode = line.substr(open + 1, close - open - 1);
    }
  }
  return info;
}

bool IsHugePagesAvailable() {
  const HugePageInfo info = GetHugePageInfo();
  return info.hugetlb_free_pages > 0 ||
         (!info.transparent_mode.empty() && info.transparent_mode != "never");
}

}  // namespace furrballs
