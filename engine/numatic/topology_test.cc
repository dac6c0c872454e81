#include "engine/numatic/topology.h"

#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "engine/numatic/error_status.h"

namespace furrballs {
namespace {

using ::testing::HasSubstr;

std::vector<int> AllowedCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  EXPECT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  std::vector<int> cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) cpus.push_back(cpu);
  }
  return cpus;
}

std::string OnlineNodes() {
  std::ifstream in("/sys/devices/system/node/online");
  std::string line;
  std::getline(in, line);
  return line;
}

// Runs `body` on a fresh thread restricted to `cpu`, so the test's own
// thread keeps its affinity.
template <typename Body>
void OnThreadRestrictedTo(int cpu, Body body) {
  std::thread([&] {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
    body();
  }).join();
}

void ExpectWellFormed(const Topology& topology) {
  ASSERT_GE(topology.node_count(), 1);
  const std::vector<int>& allowed = topology.allowed_cpus();
  for (size_t i = 0; i < topology.nodes().size(); ++i) {
    const NodeInfo& node = topology.nodes()[i];
    EXPECT_FALSE(node.cpus.empty()) << "node " << node.id;
    EXPECT_TRUE(std::is_sorted(node.cpus.begin(), node.cpus.end()));
    for (int cpu : node.cpus) {
      EXPECT_TRUE(std::binary_search(allowed.begin(), allowed.end(), cpu))
          << "node " << node.id << " lists CPU " << cpu
          << " outside the allowed set";
    }
    ASSERT_EQ(node.distances.size(), topology.nodes().size());
    EXPECT_EQ(node.distances[i], kLocalDistance);
    EXPECT_EQ(topology.Distance(node.id, node.id), kLocalDistance);
    EXPECT_GT(node.memory_bytes, 0u);
    EXPECT_TRUE(topology.CheckNode(node.id).ok());
  }
}

TEST(TopologyTest, DiscoversTheRealMachine) {
  absl::StatusOr<Topology> topology = Topology::Discover();
  ASSERT_TRUE(topology.ok()) << topology.status();
  EXPECT_FALSE(topology->simulated());
  EXPECT_EQ(topology->allowed_cpus(), AllowedCpus());
  ExpectWellFormed(*topology);
  if (OnlineNodes() == "0") {
    // A one-node machine, as CI has: one node 0 that owns every CPU.
    ASSERT_EQ(topology->node_count(), 1);
    EXPECT_EQ(topology->nodes()[0].id, 0);
    EXPECT_EQ(topology->nodes()[0].cpus, AllowedCpus());
    EXPECT_TRUE(topology->excluded_nodes().empty());
  }
}

TEST(TopologyTest, DiscoveryRespectsARestrictedCpuSet) {
  const int cpu = AllowedCpus().back();
  OnThreadRestrictedTo(cpu, [&] {
    absl::StatusOr<Topology> topology = Topology::Discover();
    ASSERT_TRUE(topology.ok()) << topology.status();
    EXPECT_EQ(topology->allowed_cpus(), std::vector<int>{cpu});
    // A CPU belongs to exactly one node, so only that node remains.
    ASSERT_EQ(topology->node_count(), 1);
    EXPECT_EQ(topology->nodes()[0].cpus, std::vector<int>{cpu});
  });
}

TEST(TopologyTest, SimulatesOneTwoFourAndEightNodes) {
  const std::vector<int> cpus = AllowedCpus();
  for (int count : {1, 2, 4, 8}) {
    SCOPED_TRACE(count);
    absl::StatusOr<Topology> topology =
        Topology::Simulate(SimulationOptions{count, kDefaultRemoteDistance});
    ASSERT_TRUE(topology.ok()) << topology.status();
    EXPECT_TRUE(topology->simulated());
    EXPECT_FALSE(topology->numa_available());
    ASSERT_EQ(topology->node_count(), count);
    ExpectWellFormed(*topology);
    std::vector<int> expected_ids(count);
    for (int k = 0; k < count; ++k) expected_ids[k] = k;
    EXPECT_EQ(topology->node_ids(), expected_ids);

    for (int from = 0; from < count; ++from) {
      for (int to = 0; to < count; ++to) {
        EXPECT_EQ(topology->Distance(from, to),
                  from == to ? kLocalDistance : kDefaultRemoteDistance);
      }
    }
    if (cpus.size() >= static_cast<size_t>(count)) {
      // Enough CPUs: the nodes partition them.
      std::vector<int> all;
      for (const NodeInfo& node : topology->nodes()) {
        all.insert(all.end(), node.cpus.begin(), node.cpus.end());
      }
      EXPECT_EQ(all, cpus);
    } else {
      // Too few: node k shares CPU k mod |CPUs|.
      for (int k = 0; k < count; ++k) {
        EXPECT_EQ(topology->nodes()[k].cpus,
                  std::vector<int>{cpus[k % cpus.size()]});
      }
    }
    const uint64_t share = topology->nodes()[0].memory_bytes;
    for (const NodeInfo& node : topology->nodes()) {
      EXPECT_EQ(node.memory_bytes, share);
    }
  }
}

// Chosen ids, as a process confined to some nodes of a machine sees them:
// node 1 alone, or nodes 1 and 3.
TEST(TopologyTest, SimulatesChosenNodeIds) {
  absl::StatusOr<Topology> one = Topology::Simulate({1, 21, {1}});
  ASSERT_TRUE(one.ok()) << one.status();
  ExpectWellFormed(*one);
  EXPECT_EQ(one->node_ids(), std::vector<int>{1});
  EXPECT_TRUE(one->CheckNode(1).ok());
  EXPECT_EQ(ErrorOf(one->CheckNode(0)), Error::kNoSuchNode);

  absl::StatusOr<Topology> two = Topology::Simulate({2, 30, {1, 3}});
  ASSERT_TRUE(two.ok()) << two.status();
  ExpectWellFormed(*two);
  EXPECT_EQ(two->node_ids(), (std::vector<int>{1, 3}));
  EXPECT_EQ(two->Distance(1, 3), 30);
  EXPECT_EQ(two->Distance(3, 3), kLocalDistance);
}

TEST(TopologyTest, SimulationUnderOneCpuSharesIt) {
  const int cpu = AllowedCpus().front();
  OnThreadRestrictedTo(cpu, [&] {
    absl::StatusOr<Topology> topology = Topology::Simulate({4, 30});
    ASSERT_TRUE(topology.ok()) << topology.status();
    for (const NodeInfo& node : topology->nodes()) {
      EXPECT_EQ(node.cpus, std::vector<int>{cpu});
    }
    EXPECT_EQ(topology->Distance(0, 3), 30);
  });
}

TEST(TopologyTest, RejectsImpossibleSimulations) {
  for (SimulationOptions options :
       {SimulationOptions{0, 21}, SimulationOptions{-1, 21},
        SimulationOptions{kMaxSimulatedNodes + 1, 21},
        SimulationOptions{2, kLocalDistance}, SimulationOptions{2, 256},
        SimulationOptions{2, 21, {1}}, SimulationOptions{2, 21, {3, 1}},
        SimulationOptions{1, 21, {-1}},
        SimulationOptions{1, 21, {kMaxSimulatedNodes}}}) {
    absl::StatusOr<Topology> topology = Topology::Simulate(options);
    ASSERT_FALSE(topology.ok());
    EXPECT_EQ(ErrorOf(topology.status()), Error::kInvalidTopology)
        << topology.status();
  }
}

TEST(TopologyTest, UnknownNodesAreNoSuchNodeWithAUsefulMessage) {
  absl::StatusOr<Topology> topology = Topology::Simulate({4, 21});
  ASSERT_TRUE(topology.ok());
  for (int node : {-1, 4, 99}) {
    const absl::Status status = topology->CheckNode(node);
    EXPECT_EQ(ErrorOf(status), Error::kNoSuchNode);
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("node " + std::to_string(node) + " is not in"));
    EXPECT_THAT(std::string(status.message()),
                HasSubstr("usable nodes are 0-3"));
    EXPECT_EQ(topology->FindNode(node), nullptr);
  }
  EXPECT_EQ(topology->Distance(0, 99), -1);
  EXPECT_EQ(topology->Distance(99, 0), -1);

  absl::StatusOr<Topology> real = Topology::Discover();
  ASSERT_TRUE(real.ok());
  const absl::Status status = real->CheckNode(4096);
  EXPECT_EQ(ErrorOf(status), Error::kNoSuchNode);
  EXPECT_THAT(std::string(status.message()), HasSubstr("discovered topology"));
}

TEST(TopologyTest, FormatsIdListsLikeTheKernel) {
  EXPECT_EQ(FormatIdList(std::vector<int>{}), "");
  EXPECT_EQ(FormatIdList(std::vector<int>{0}), "0");
  EXPECT_EQ(FormatIdList(std::vector<int>{0, 1}), "0-1");
  EXPECT_EQ(FormatIdList(std::vector<int>{0, 1, 2, 3, 8, 10, 11}),
            "0-3,8,10-11");
}

TEST(TopologyTest, PrintsAReport) {
  absl::StatusOr<Topology> simulated = Topology::Simulate({2, 21});
  ASSERT_TRUE(simulated.ok());
  const std::string report = simulated->ToString();
  EXPECT_THAT(report, HasSubstr("simulated, 2 virtual node(s)"));
  EXPECT_THAT(report, HasSubstr("allowed CPUs: "));
  EXPECT_THAT(report, HasSubstr("node 1: CPUs "));
  EXPECT_THAT(report, HasSubstr("distances:"));
  EXPECT_THAT(report, HasSubstr("   10   21"));

  absl::StatusOr<Topology> real = Topology::Discover();
  ASSERT_TRUE(real.ok());
  EXPECT_THAT(real->ToString(), HasSubstr("topology: discovered"));
}

TEST(TopologyTest, ConcurrentDiscoveriesAgree) {
  absl::StatusOr<Topology> reference = Topology::Discover();
  ASSERT_TRUE(reference.ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 20; ++i) {
        absl::StatusOr<Topology> topology = Topology::Discover();
        ASSERT_TRUE(topology.ok());
        EXPECT_EQ(topology->node_ids(), reference->node_ids());
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

std::string ProcStatusMemsAllowed() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Mems_allowed_list:", 0) == 0) {
      return line.substr(line.find_first_not_of(" \t", 18));
    }
  }
  return "";
}

TEST(TopologyTest, ParsesIdListsLikeTheKernelWritesThem) {
  EXPECT_EQ(*ParseIdList(""), std::vector<int>{});
  EXPECT_EQ(*ParseIdList("0\n"), std::vector<int>{0});
  EXPECT_EQ(*ParseIdList("0-3,8,10-11"),
            (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  for (const std::vector<int>& ids :
       {std::vector<int>{1}, std::vector<int>{0, 2, 3, 4, 7}}) {
    EXPECT_EQ(*ParseIdList(FormatIdList(ids)), ids);
  }
  for (const char* bad : {"x", "1-", "-1", "3-1", "1,1", "2,1", "0-1,1"}) {
    EXPECT_FALSE(ParseIdList(bad).ok()) << bad;
  }
}

// The cpuset as the kernel reports it, independent of libnuma.
TEST(TopologyTest, RecordsTheKernelsViewOfTheCpuset) {
  absl::StatusOr<Topology> topology = Topology::Discover();
  ASSERT_TRUE(topology.ok()) << topology.status();
  const CpusetInfo& cpuset = topology->cpuset();
  EXPECT_EQ(cpuset.mems_allowed, ProcStatusMemsAllowed());
  EXPECT_EQ(cpuset.online_nodes, OnlineNodes());
  EXPECT_FALSE(cpuset.cgroup.empty());
  if (topology->numa_available()) {
    // With memory policy, the kernel's lists and libnuma's agree.
    EXPECT_EQ(cpuset.mems_allowed,
              FormatIdList(topology->allowed_memory_nodes()));
    std::vector<int> with_cpus;
    for (const NodeInfo& node : topology->nodes()) with_cpus.push_back(node.id);
    for (const ExcludedNode& node : topology->excluded_nodes()) {
      if (node.reason == "memory not allowed") with_cpus.push_back(node.id);
    }
    std::sort(with_cpus.begin(), with_cpus.end());
    EXPECT_EQ(cpuset.cpu_nodes, with_cpus);
  }
}

TEST(TopologyTest, SummaryIsOneLineThatNamesTheNodesAndTheirSource) {
  absl::StatusOr<Topology> topology = Topology::Discover();
  ASSERT_TRUE(topology.ok()) << topology.status();
  const std::string summary = topology->Summary();
  EXPECT_EQ(summary.find('\n'), std::string::npos) << summary;
  EXPECT_THAT(summary, ::testing::StartsWith("numa: "));
  EXPECT_THAT(summary,
              HasSubstr("allowed CPUs " + FormatIdList(AllowedCpus()) + " (" +
                        std::to_string(AllowedCpus().size()) + ")"));
  EXPECT_THAT(summary, HasSubstr("Mems_allowed " + ProcStatusMemsAllowed()));
  EXPECT_THAT(summary, HasSubstr("; cgroup " + topology->cpuset().cgroup));
  if (topology->numa_available()) {
    EXPECT_THAT(summary,
                HasSubstr("serving node(s) " +
                          FormatIdList(topology->node_ids()) + " of " +
                          OnlineNodes() + " online (node "));
    for (const NodeInfo& node : topology->nodes()) {
      EXPECT_THAT(summary, HasSubstr("node " + std::to_string(node.id) +
                                     ": CPUs " + FormatIdList(node.cpus)));
    }
  }
}

TEST(TopologyTest, SummaryFollowsARestrictedCpuSet) {
  const int cpu = AllowedCpus().back();
  OnThreadRestrictedTo(cpu, [&] {
    absl::StatusOr<Topology> topology = Topology::Discover();
    ASSERT_TRUE(topology.ok()) << topology.status();
    const std::string summary = topology->Summary();
    EXPECT_THAT(summary, HasSubstr("allowed CPUs " + std::to_string(cpu) +
                                   " (1)"));
    if (topology->numa_available()) {
      EXPECT_THAT(summary, HasSubstr(": CPUs " + std::to_string(cpu) + " (1)"));
    }
    ASSERT_EQ(topology->cpuset().cpu_nodes.size(), 1u);
  });
}

TEST(TopologyTest, SimulatedSummarySaysWhereTheCpusReallyAre) {
  absl::StatusOr<Topology> topology = Topology::Simulate({4, 21});
  ASSERT_TRUE(topology.ok());
  const std::string summary = topology->Summary();
  EXPECT_THAT(summary, HasSubstr("numa: simulated 4 node(s) over allowed CPUs "));
  EXPECT_THAT(summary, HasSubstr("memory not bound"));
  EXPECT_THAT(summary, HasSubstr("the allowed CPUs are on node(s) "));
  EXPECT_EQ(summary.find('\n'), std::string::npos);
}

}  // namespace
}  // namespace furrballs
