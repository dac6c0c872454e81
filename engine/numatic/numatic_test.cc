#include "engine/numatic/numatic.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory_resource>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace furrballs {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<Numatic> MakeNumatic(int simulate_nodes = 0,
                                     uint64_t delay_ns = 0) {
  NumaticOptions options;
  options.simulate_nodes = simulate_nodes;
  options.remote_access_delay_ns = delay_ns;
  absl::StatusOr<std::unique_ptr<Numatic>> numatic = Numatic::Create(options);
  EXPECT_TRUE(numatic.ok()) << numatic.status();
  return numatic.ok() ? *std::move(numatic) : nullptr;
}

bool IsAligned(const void* p, size_t alignment) {
  return reinterpret_cast<uintptr_t>(p) % alignment == 0;
}

std::vector<int> AffinityOfThisThread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

// Pinning changes the calling thread for good, so every pinning test runs
// its body on a thread of its own.
template <typename Body>
void OnNewThread(Body body) {
  std::thread(body).join();
}

// Runs `body` on a thread whose NUMA memory-policy system calls fail with
// `error`, the way a kernel without NUMA (ENOSYS) or Docker's default seccomp
// profile (EPERM) answers them. The filter belongs to that thread alone and
// ends with it. Returns false if this environment forbids seccomp filters.
template <typename Body>
bool WithoutNumaSyscalls(int error, Body body) {
  bool installed = false;
  std::thread([&] {
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_get_mempolicy, 4, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_set_mempolicy, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_mbind, 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_move_pages, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_RET | BPF_K,
                 SECCOMP_RET_ERRNO | (static_cast<uint32_t>(error) &
                                      SECCOMP_RET_DATA)),
    };
    struct sock_fprog program = {
        static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])),
        filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
      return;
    }
    installed = true;
    body();
  }).join();
  return installed;
}

TEST(NumaticTest, WithoutNumaSyscallsThereIsOneUnboundNode) {
  for (int error : {ENOSYS, EPERM}) {
    SCOPED_TRACE(error);
    const bool ran = WithoutNumaSyscalls(error, [&] {
      std::unique_ptr<Numatic> numatic = MakeNumatic();
      ASSERT_NE(numatic, nullptr);
      const Topology& topology = numatic->topology();
      EXPECT_FALSE(topology.numa_available());
      EXPECT_FALSE(topology.numa_unavailable_reason().empty());
      EXPECT_THAT(topology.ToString(), HasSubstr("NUMA unavailable"));
      // The start-up line still says where the cpuset is, from /proc and
      // /sys (this machine has one node).
      EXPECT_THAT(topology.Summary(),
                  HasSubstr("numa: memory policy unavailable ("));
      if (topology.cpuset().online_nodes == "0") {
        EXPECT_THAT(topology.Summary(),
                    HasSubstr("the allowed CPUs are on node(s) 0 of 0 online, "
                              "Mems_allowed 0"));
      }
      ASSERT_EQ(topology.node_ids(), std::vector<int>{0});
      EXPECT_EQ(topology.nodes()[0].cpus, AffinityOfThisThread());
      EXPECT_GT(topology.nodes()[0].memory_bytes, 0u);

      absl::StatusOr<NumaBlock> block = numatic->AllocateOnNode(1 << 16, 0);
      ASSERT_TRUE(block.ok()) << block.status();
      std::memset(block->data, 1, block->size);
      absl::StatusOr<int> node = GetPageNode(block->data);
      if (error == ENOSYS) {
        EXPECT_EQ(*node, 0);  // no NUMA in the kernel: everything is node 0
      } else {
        EXPECT_FALSE(node.ok());  // refused: the node cannot be known
      }
      numatic->Free(*block);
      EXPECT_EQ(ErrorOf(numatic->AllocateOnNode(4096, 1).status()),
                Error::kNoSuchNode);
      ASSERT_TRUE(numatic->PinCurrentThreadToNode(0).ok());
      EXPECT_EQ(numatic->GetCurrentNode(), 0);
    });
    if (!ran) GTEST_SKIP() << "seccomp filters are not permitted here";
  }
}

TEST(NumaticTest, RealTopologyAllocationLandsOnItsNode) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const size_t page = GetPageSize();
  for (int node : numatic->topology().node_ids()) {
    SCOPED_TRACE(node);
    absl::StatusOr<NumaBlock> block = numatic->AllocateOnNode(1 << 20, node);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(block->node, node);
    EXPECT_EQ(block->size, size_t{1} << 20);
    EXPECT_EQ(block->pages, PageKind::kBase);
    EXPECT_TRUE(IsAligned(block->data, page));
    EXPECT_EQ(numatic->MappedBytes(node), block->size);
    std::memset(block->data, 0xab, block->size);

    // Every page is resident on the node it was asked for.
    std::vector<const void*> pages;
    for (size_t offset = 0; offset < block->size; offset += page) {
      pages.push_back(static_cast<const char*>(block->data) + offset);
    }
    absl::StatusOr<std::vector<int>> nodes = QueryPageNodes(pages);
    ASSERT_TRUE(nodes.ok()) << nodes.status();
    EXPECT_EQ(*nodes, std::vector<int>(pages.size(), node));
    absl::StatusOr<int> last =
        GetPageNode(static_cast<const char*>(block->data) + block->size - 1);
    ASSERT_TRUE(last.ok()) << last.status();
    EXPECT_EQ(*last, node);

    numatic->Free(*block);
    EXPECT_EQ(numatic->MappedBytes(node), 0u);
  }
}

TEST(NumaticTest, OnThisOneNodeMachineMemoryIsOnNodeZero) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  if (numatic->topology().node_ids() != std::vector<int>{0}) {
    GTEST_SKIP() << "not a one-node machine";
  }
  absl::StatusOr<NumaBlock> block = numatic->AllocateLocal(4096);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(block->node, 0);
  // Not faulted in until written (numatic.h).
  EXPECT_EQ(ErrorOf(GetPageNode(block->data).status()),
            Error::kInvalidArgument);
  static_cast<char*>(block->data)[0] = 1;
  EXPECT_EQ(*GetPageNode(block->data), 0);
  numatic->Free(*block);
}

TEST(NumaticTest, RoundsUpToWholePages) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(2);
  ASSERT_NE(numatic, nullptr);
  absl::StatusOr<NumaBlock> block = numatic->AllocateOnNode(1, 1);
  ASSERT_TRUE(block.ok()) << block.status();
  EXPECT_EQ(block->size, GetPageSize());
  EXPECT_TRUE(IsAligned(block->data, kCacheLineSize));
  numatic->Free(*block);
}

TEST(NumaticTest, BadRequestsAreErrorsWithUsefulMessages) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(4);
  ASSERT_NE(numatic, nullptr);

  absl::StatusOr<NumaBlock> block = numatic->AllocateOnNode(4096, 4);
  ASSERT_FALSE(block.ok());
  EXPECT_EQ(ErrorOf(block.status()), Error::kNoSuchNode);
  EXPECT_THAT(std::string(block.status().message()),
              HasSubstr("node 4 is not in this simulated topology; usable "
                        "nodes are 0-3"));
  EXPECT_EQ(ErrorOf(numatic->AllocateOnNodeHuge(4096, -1).status()),
            Error::kNoSuchNode);
  EXPECT_EQ(ErrorOf(numatic->AllocateOnNode(0, 0).status()),
            Error::kInvalidArgument);
  EXPECT_EQ(ErrorOf(numatic->PinCurrentThreadToNode(17)), Error::kNoSuchNode);
  EXPECT_EQ(ErrorOf(numatic->NodeResource(8).status()), Error::kNoSuchNode);
  EXPECT_EQ(ErrorOf(numatic->NodeAllocator(8).status()), Error::kNoSuchNode);
  EXPECT_EQ(numatic->GetDistance(0, 8), -1);
  EXPECT_EQ(numatic->MappedBytes(8), 0u);

  std::unique_ptr<Numatic> real = MakeNumatic();
  ASSERT_NE(real, nullptr);
  const absl::Status status = real->AllocateOnNode(4096, 4096).status();
  EXPECT_EQ(ErrorOf(status), Error::kNoSuchNode);
  EXPECT_THAT(std::string(status.message()), HasSubstr("node 4096"));

  absl::StatusOr<std::unique_ptr<Numatic>> negative =
      Numatic::Create(NumaticOptions{-1});
  EXPECT_EQ(ErrorOf(negative.status()), Error::kInvalidArgument);
  EXPECT_EQ(ErrorOf(Numatic::Create(NumaticOptions{65}).status()),
            Error::kInvalidTopology);
}

TEST(NumaticTest, KernelRefusalIsAllocationFailed) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const int node = numatic->topology().nodes().front().id;
  // 1 PiB: more than the 128 TiB user address space, so mmap must refuse.
  for (size_t bytes : {size_t{1} << 50, ~size_t{0}}) {
    absl::StatusOr<NumaBlock> block = numatic->AllocateOnNode(bytes, node);
    ASSERT_FALSE(block.ok());
    EXPECT_EQ(ErrorOf(block.status()), Error::kAllocationFailed);
    EXPECT_THAT(std::string(block.status().message()),
                HasSubstr("node " + std::to_string(node)));
  }
  EXPECT_EQ(numatic->MappedBytes(node), 0u);
}

TEST(NumaticTest, HugeAllocationIsHugeAlignedAndPlaced) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const size_t huge = GetHugePageSize();
  ASSERT_GT(huge, GetPageSize());
  EXPECT_EQ(GetHugePageInfo().page_size, huge);
  for (int node : numatic->topology().node_ids()) {
    absl::StatusOr<NumaBlock> block = numatic->AllocateOnNodeHuge(1, node);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(block->size, huge);
    EXPECT_NE(block->pages, PageKind::kBase);
    EXPECT_TRUE(IsAligned(block->data, huge));
    static_cast<char*>(block->data)[0] = 1;  // a THP block is not faulted in
    EXPECT_EQ(*GetPageNode(block->data), node);
    numatic->Free(*block);
  }
  OnNewThread([&] {
    const int node = numatic->topology().nodes().back().id;
    ASSERT_TRUE(numatic->PinCurrentThreadToNode(node).ok());
    absl::StatusOr<NumaBlock> block = numatic->AllocateLocalHuge(huge + 1);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(block->node, node);
    EXPECT_EQ(block->size, 2 * huge);
    numatic->Free(*block);
  });
}

// Whether each page of [p, p + bytes) is resident (mincore).
std::vector<bool> Resident(const void* p, size_t bytes) {
  const size_t page = GetPageSize();
  std::vector<unsigned char> in_core((bytes + page - 1) / page);
  EXPECT_EQ(mincore(const_cast<void*>(p), bytes, in_core.data()), 0)
      << strerror(errno);
  std::vector<bool> resident;
  for (unsigned char c : in_core) resident.push_back((c & 1) != 0);
  return resident;
}

// A transparent-huge block is aligned to the huge page size and advised, but
// not rounded up and not faulted in; it lands on its node when written, and
// its pages can still be given back one base page at a time (a huge page is
// split). Below one huge page it is an ordinary block.
TEST(NumaticTest, TransparentHugeBlockIsAlignedAdvisedAndNotFaulted) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const size_t page = GetPageSize();
  const size_t huge = GetHugePageSize();
  // The advice is accepted wherever the kernel has THP at all, even "never".
  const bool thp = !GetHugePageInfo().transparent_mode.empty();
  for (int node : numatic->topology().node_ids()) {
    SCOPED_TRACE(node);
    const size_t bytes = 2 * huge + 3 * page;
    absl::StatusOr<NumaBlock> block =
        numatic->AllocateOnNodeTransparentHuge(bytes, node);
    ASSERT_TRUE(block.ok()) << block.status();
    EXPECT_EQ(block->size, bytes);
    EXPECT_EQ(block->node, node);
    EXPECT_TRUE(IsAligned(block->data, huge));
    if (thp) EXPECT_EQ(block->pages, PageKind::kTransparentHuge);
    EXPECT_EQ(numatic->MappedBytes(node), bytes);
    const std::vector<bool> before = Resident(block->data, bytes);
    EXPECT_EQ(std::count(before.begin(), before.end(), true), 0)
        << "nothing is faulted in at allocation";
    auto* bytes_of = static_cast<unsigned char*>(block->data);
    std::memset(bytes_of, 1, bytes);
    EXPECT_EQ(*GetPageNode(bytes_of + huge + page), node);
    EXPECT_EQ(RawAllocator::ReleaseMappedPages(nullptr, bytes_of + page, page),
              page);
    // Asked before the reads below, which map the zero page there.
    EXPECT_FALSE(Resident(bytes_of + page, page)[0]) << "given back";
    EXPECT_EQ(bytes_of[page], 0);
    EXPECT_EQ(bytes_of[2 * page - 1], 0);
    EXPECT_EQ(bytes_of[page - 1], 1) << "the rest of the huge page stays";
    EXPECT_EQ(bytes_of[2 * page], 1);
    numatic->Free(*block);

    absl::StatusOr<NumaBlock> small =
        numatic->AllocateOnNodeTransparentHuge(huge - page, node);
    ASSERT_TRUE(small.ok()) << small.status();
    EXPECT_EQ(small->size, huge - page);
    EXPECT_EQ(small->pages, PageKind::kBase);
    numatic->Free(*small);
    EXPECT_EQ(numatic->MappedBytes(node), 0u);
  }
}

TEST(NumaticTest, TransparentHugeNodeAllocator) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const int node = numatic->topology().nodes().front().id;
  EXPECT_EQ(ErrorOf(numatic->NodeAllocator(node, PageKind::kHugeTlb).status()),
            Error::kInvalidArgument);
  absl::StatusOr<RawAllocator> allocator =
      numatic->NodeAllocator(node, PageKind::kTransparentHuge);
  ASSERT_TRUE(allocator.ok()) << allocator.status();
  EXPECT_TRUE(allocator->zeroed);
  const size_t huge = GetHugePageSize();
  void* big = allocator->Allocate(3 * huge);
  ASSERT_NE(big, nullptr);
  EXPECT_TRUE(IsAligned(big, huge));
  EXPECT_EQ(numatic->MappedBytes(node), 3 * huge);
  void* small = allocator->Allocate(1000);
  ASSERT_NE(small, nullptr);
  EXPECT_EQ(numatic->MappedBytes(node), 3 * huge + GetPageSize());
  std::memset(big, 1, 3 * huge);
  EXPECT_EQ(*GetPageNode(big), node);
  EXPECT_EQ(allocator->Release(big, 3 * huge), 3 * huge);
  EXPECT_EQ(static_cast<unsigned char*>(big)[huge], 0);
  allocator->Deallocate(big, 3 * huge);
  allocator->Deallocate(small, 1000);
  EXPECT_EQ(numatic->MappedBytes(node), 0u);
}

TEST(NumaticTest, AllOrNothingAllocatesOnEveryNode) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(4);
  ASSERT_NE(numatic, nullptr);
  const std::vector<int> nodes = {0, 1, 2, 3};
  absl::StatusOr<std::vector<NumaBlock>> blocks =
      numatic->AllocateOnEachNode(64 << 10, nodes);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  ASSERT_EQ(blocks->size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ((*blocks)[k].node, k);
    EXPECT_EQ(numatic->MappedBytes(k), size_t{64} << 10);
  }
  for (const NumaBlock& block : *blocks) numatic->Free(block);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(numatic->MappedBytes(k), 0u);
}

TEST(NumaticTest, AllOrNothingFreesWhatItGotWhenANodeFails) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(4);
  ASSERT_NE(numatic, nullptr);
  const std::vector<int> nodes = {0, 1, 2, 3, 7};
  absl::StatusOr<std::vector<NumaBlock>> blocks =
      numatic->AllocateOnEachNode(64 << 10, nodes);
  ASSERT_FALSE(blocks.ok());
  EXPECT_EQ(ErrorOf(blocks.status()), Error::kNoSuchNode);
  EXPECT_THAT(std::string(blocks.status().message()),
              HasSubstr("failed at node 7 (5 of 5); freed the 4 block(s)"));
  for (int k = 0; k < 4; ++k) EXPECT_EQ(numatic->MappedBytes(k), 0u);

  // The same on the real topology, failing on the kernel's refusal.
  std::unique_ptr<Numatic> real = MakeNumatic();
  ASSERT_NE(real, nullptr);
  const int node = real->topology().nodes().front().id;
  absl::StatusOr<std::vector<NumaBlock>> huge =
      real->AllocateOnEachNode(size_t{1} << 50, std::vector<int>{node});
  EXPECT_EQ(ErrorOf(huge.status()), Error::kAllocationFailed);
  absl::StatusOr<std::vector<NumaBlock>> partial =
      real->AllocateOnEachNode(4096, std::vector<int>{node, node, -3});
  EXPECT_EQ(ErrorOf(partial.status()), Error::kNoSuchNode);
  EXPECT_THAT(std::string(partial.status().message()),
              HasSubstr("freed the 2 block(s)"));
  EXPECT_EQ(real->MappedBytes(node), 0u);
}

TEST(NumaticTest, PinningAndGetCurrentNodeAgreeOnTheRealTopology) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  for (const NodeInfo& node : numatic->topology().nodes()) {
    OnNewThread([&] {
      ASSERT_TRUE(numatic->PinCurrentThreadToNode(node.id).ok());
      EXPECT_EQ(AffinityOfThisThread(), node.cpus);
      EXPECT_EQ(numatic->GetCurrentNode(), node.id);
      EXPECT_EQ(numatic->GetCurrentNodeUncached(), node.id);
      const int cpu = sched_getcpu();
      EXPECT_TRUE(std::find(node.cpus.begin(), node.cpus.end(), cpu) !=
                  node.cpus.end());
      absl::StatusOr<NumaBlock> block = numatic->AllocateLocal(8192);
      ASSERT_TRUE(block.ok()) << block.status();
      EXPECT_EQ(block->node, node.id);
      static_cast<char*>(block->data)[0] = 1;  // fault the page in
      EXPECT_EQ(*GetPageNode(block->data), node.id);
      numatic->Free(*block);
    });
  }
}

TEST(NumaticTest, PinningToVirtualNodes) {
  const std::vector<int> cpus = AffinityOfThisThread();
  for (int count : {2, 4, 8}) {
    SCOPED_TRACE(count);
    std::unique_ptr<Numatic> numatic = MakeNumatic(count);
    ASSERT_NE(numatic, nullptr);
    for (const NodeInfo& node : numatic->topology().nodes()) {
      OnNewThread([&] {
        ASSERT_TRUE(numatic->PinCurrentThreadToNode(node.id).ok());
        EXPECT_EQ(AffinityOfThisThread(), node.cpus);
        // The cache holds the pinned node even when virtual nodes share
        // CPUs and the CPU alone could not tell them apart.
        EXPECT_EQ(numatic->GetCurrentNode(), node.id);
        const int uncached = numatic->GetCurrentNodeUncached();
        const NodeInfo* owner = numatic->topology().FindNode(uncached);
        ASSERT_NE(owner, nullptr);
        EXPECT_EQ(owner->cpus, node.cpus);
        if (cpus.size() >= static_cast<size_t>(count)) {
          EXPECT_EQ(uncached, node.id);
        } else {
          EXPECT_LE(uncached, node.id);
        }
      });
    }
  }
}

TEST(NumaticTest, EachNumaticKeepsItsOwnCurrentNodeCache) {
  std::unique_ptr<Numatic> simulated = MakeNumatic(8);
  std::unique_ptr<Numatic> real = MakeNumatic();
  ASSERT_NE(simulated, nullptr);
  ASSERT_NE(real, nullptr);
  OnNewThread([&] {
    ASSERT_TRUE(simulated->PinCurrentThreadToNode(5).ok());
    EXPECT_EQ(simulated->GetCurrentNode(), 5);
    // The real Numatic must not read virtual node 5 from the shared cache.
    const int node = real->GetCurrentNode();
    EXPECT_NE(real->topology().FindNode(node), nullptr);
    EXPECT_EQ(node, real->GetCurrentNodeUncached());
  });
  OnNewThread([&] {
    // An unpinned thread still gets a node of the topology.
    EXPECT_NE(simulated->topology().FindNode(simulated->GetCurrentNode()),
              nullptr);
  });
}

TEST(NumaticTest, NodeMemoryResourceBacksPmrContainers) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const int node = numatic->topology().nodes().back().id;
  absl::StatusOr<NumaNodeMemoryResource*> resource =
      numatic->NodeResource(node);
  ASSERT_TRUE(resource.ok()) << resource.status();
  EXPECT_EQ((*resource)->node(), node);
  {
    std::pmr::vector<uint64_t> values(*resource);
    for (uint64_t i = 0; i < 100000; ++i) values.push_back(i);
    EXPECT_EQ(values[99999], 99999u);
    EXPECT_TRUE(IsAligned(values.data(), kCacheLineSize));
    EXPECT_EQ(*GetPageNode(values.data()), node);
    EXPECT_GE(numatic->MappedBytes(node), 100000 * sizeof(uint64_t));
  }
  EXPECT_EQ(numatic->MappedBytes(node), 0u);

  // Alignment beyond a page is honoured, and release is exact.
  void* p = (*resource)->allocate(100, size_t{1} << 21);
  EXPECT_TRUE(IsAligned(p, size_t{1} << 21));
  (*resource)->deallocate(p, 100, size_t{1} << 21);
  EXPECT_EQ(numatic->MappedBytes(node), 0u);

  EXPECT_THROW(static_cast<void>((*resource)->allocate(size_t{1} << 50)),
               std::bad_alloc);
  EXPECT_TRUE((*resource)->is_equal(**resource));
  EXPECT_FALSE((*resource)->is_equal(*std::pmr::new_delete_resource()));
}

TEST(NumaticTest, NodeMemoryResourceOnAVirtualNode) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(8);
  ASSERT_NE(numatic, nullptr);
  absl::StatusOr<NumaNodeMemoryResource*> resource = numatic->NodeResource(6);
  ASSERT_TRUE(resource.ok());
  std::pmr::vector<int> values({1, 2, 3}, *resource);
  EXPECT_EQ(values.size(), 3u);
  EXPECT_GT(numatic->MappedBytes(6), 0u);
  EXPECT_EQ(numatic->MappedBytes(5), 0u);
  EXPECT_FALSE((*resource)->is_equal(**numatic->NodeResource(5)));
}

TEST(NumaticTest, RawAllocatorPlacesOnItsNode) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const int node = numatic->topology().nodes().front().id;
  absl::StatusOr<RawAllocator> allocator = numatic->NodeAllocator(node);
  ASSERT_TRUE(allocator.ok()) << allocator.status();
  // The context is the node's resource, which names the node.
  EXPECT_EQ(static_cast<NumaNodeMemoryResource*>(allocator->context)->node(),
            node);
  void* p = allocator->Allocate(1000);
  ASSERT_NE(p, nullptr);
  EXPECT_TRUE(IsAligned(p, kCacheLineSize));
  std::memset(p, 1, 1000);
  EXPECT_EQ(*GetPageNode(p), node);
  allocator->Deallocate(p, 1000);
  EXPECT_EQ(numatic->MappedBytes(node), 0u);
  EXPECT_EQ(allocator->Allocate(size_t{1} << 50), nullptr);

  // Release gives whole pages back (they read as zeros and are placed on
  // the node again when touched); the allocation stays mapped.
  const size_t page = GetPageSize();
  auto* q = static_cast<unsigned char*>(allocator->Allocate(3 * page + 100));
  ASSERT_NE(q, nullptr);
  std::memset(q, 1, 3 * page + 100);
  EXPECT_EQ(allocator->Release(q, 3 * page + 100), 3 * page)
      << "the partial last page is kept";
  EXPECT_EQ(q[0], 0);
  EXPECT_EQ(q[3 * page - 1], 0);
  EXPECT_EQ(q[3 * page], 1);
  q[0] = 2;
  EXPECT_EQ(*GetPageNode(q), node);
  allocator->Deallocate(q, 3 * page + 100);
}

TEST(NumaticTest, RemoteDelayOnlyBetweenDifferentNodes) {
  std::unique_ptr<Numatic> delayed = MakeNumatic(4, 50);
  ASSERT_NE(delayed, nullptr);
  EXPECT_EQ(delayed->remote_access_delay_ns(), 50u);
  int waits = 0;
  for (int from = 0; from < 4; ++from) {
    for (int to = 0; to < 4; ++to) {
      const bool waited = delayed->SimulateRemoteAccess(from, to);
      EXPECT_EQ(waited, from != to) << from << "->" << to;
      waits += waited ? 1 : 0;
    }
  }
  EXPECT_EQ(waits, 12);

  std::unique_ptr<Numatic> undelayed = MakeNumatic(4);
  ASSERT_NE(undelayed, nullptr);
  EXPECT_FALSE(undelayed->SimulateRemoteAccess(0, 1));
  EXPECT_FALSE(undelayed->SimulateRemoteAccess(2, 2));

  // The delay also applies to a real topology (a QEMU guest's nodes).
  std::unique_ptr<Numatic> real = MakeNumatic(0, 20);
  ASSERT_NE(real, nullptr);
  EXPECT_TRUE(real->SimulateRemoteAccess(0, 1));
  EXPECT_FALSE(real->SimulateRemoteAccess(0, 0));
}

TEST(NumaticTest, MovePagesOnTheRealTopology) {
  std::unique_ptr<Numatic> numatic = MakeNumatic();
  ASSERT_NE(numatic, nullptr);
  const int node = numatic->topology().nodes().back().id;
  absl::StatusOr<NumaBlock> block = numatic->AllocateOnNode(16384, node);
  ASSERT_TRUE(block.ok());
  std::memset(block->data, 1, block->size);  // fault in: only then it moves
  std::vector<void*> pages;
  for (size_t offset = 0; offset < block->size; offset += GetPageSize()) {
    pages.push_back(static_cast<char*>(block->data) + offset + 7);
  }
  absl::StatusOr<std::vector<int>> moved = numatic->MovePages(pages, node);
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(*moved, std::vector<int>(pages.size(), node));
  EXPECT_EQ(ErrorOf(numatic->MovePages(pages, 4096).status()),
            Error::kNoSuchNode);
  numatic->Free(*block);

  std::unique_ptr<Numatic> simulated = MakeNumatic(2);
  ASSERT_NE(simulated, nullptr);
  EXPECT_EQ(ErrorOf(simulated->MovePages(pages, 1).status()),
            Error::kInvalidTopology);
}

TEST(NumaticTest, PageQueriesOfPagesWithoutANode) {
  const size_t page = GetPageSize();
  void* untouched = mmap(nullptr, page, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(untouched, MAP_FAILED);
  absl::StatusOr<int> node = GetPageNode(untouched);
  ASSERT_FALSE(node.ok());
  EXPECT_EQ(ErrorOf(node.status()), Error::kInvalidArgument);
  EXPECT_THAT(std::string(node.status().message()),
              HasSubstr("never touched"));
  munmap(untouched, page);
}

TEST(NumaticTest, HugePageAvailabilityIsConsistent) {
  const HugePageInfo info = GetHugePageInfo();
  EXPECT_EQ(IsHugePagesAvailable(),
            info.hugetlb_free_pages > 0 ||
                (!info.transparent_mode.empty() &&
                 info.transparent_mode != "never"));
}

TEST(NumaticTest, ConcurrentAllocationPinningAndLookups) {
  std::unique_ptr<Numatic> numatic = MakeNumatic(4, 10);
  ASSERT_NE(numatic, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      ASSERT_TRUE(numatic->PinCurrentThreadToNode(t).ok());
      for (int i = 0; i < 50; ++i) {
        const int node = (t + i) % 4;
        absl::StatusOr<NumaBlock> block = numatic->AllocateOnNode(8192, node);
        ASSERT_TRUE(block.ok()) << block.status();
        static_cast<char*>(block->data)[0] = static_cast<char>(i);
        numatic->SimulateRemoteAccess(numatic->GetCurrentNode(), node);
        numatic->Free(*block);
        EXPECT_EQ(numatic->GetCurrentNode(), t);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (int k = 0; k < 4; ++k) EXPECT_EQ(numatic->MappedBytes(k), 0u);
}

}  // namespace
}  // namespace furrballs
