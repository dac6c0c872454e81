// engine/numatic/topology.h: the NUMA topology a Furrballs process runs on,
// either discovered from the machine or simulated (report §2.6).
//
// Thread safety: a Topology is an immutable value; share it freely. Discover()
// and Simulate() may be called from any thread.
//
// A Topology lists the nodes the process may use, not the nodes the machine
// has. Discovery starts from the calling thread's CPU affinity
// (sched_getaffinity, which a Kubernetes cpuset, `taskset` or
// `numactl --cpunodebind` narrows) and the memory nodes the cpuset allows
// (get_mempolicy(MPOL_F_MEMS_ALLOWED)). A node is kept only if it has at
// least one allowed CPU and its memory is allowed, because every Furrballs
// shard needs both a pinned worker and node-local memory. Memory-only nodes
// (CXL expanders) are therefore excluded today; excluded_nodes() says why
// each one was dropped. Call Discover() before pinning any thread, from a
// thread that still has the process's full affinity.
//
// When the process cannot use NUMA memory policy (a kernel without NUMA, or
// a container whose seccomp profile refuses get_mempolicy/mbind/move_pages),
// the topology is one node, id 0, holding every allowed CPU, and
// numa_unavailable_reason() says why.
//
// A simulated topology splits the allowed CPUs into N virtual nodes so that
// every multi-node path can run on a one-node machine (ids 0..N-1 unless
// chosen, SimulationOptions::ids):
//   * with at least N CPUs, node k gets the k-th contiguous slice of them;
//   * with fewer CPUs than nodes, node k gets CPU (k mod CPUs): nodes share
//     CPUs round-robin (a 2-core machine still has 8 virtual nodes);
//   * distances are synthetic: kLocalDistance on the diagonal, the configured
//     remote distance elsewhere;
//   * each node reports an equal share of the allowed memory; memory is not
//     bound to anything (see numatic.h).
#ifndef FURRBALLS_ENGINE_NUMATIC_TOPOLOGY_H_
#define FURRBALLS_ENGINE_NUMATIC_TOPOLOGY_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>

namespace furrballs {

// ACPI SLIT distances: 10 is a node's distance to itself, and 21 is what
// two-socket Intel servers (and the QEMU guests in tests/numa_guest) report.
inline constexpr int kLocalDistance = 10;
inline constexpr int kDefaultRemoteDistance = 21;

// Simulation serves tests and what-if runs; 64 virtual nodes is far beyond
// the machines Furrballs targets (the report's largest has 4 nodes).
inline constexpr int kMaxSimulatedNodes = 64;

struct NodeInfo {
  int id = 0;               // kernel node id (real), or as simulated
  std::vector<int> cpus;    // allowed CPUs of this node, ascending
  std::vector<int> distances;  // distances[i]: distance to Topology::nodes()[i]
  uint64_t memory_bytes = 0;   // node memory (simulated: an equal share)
  uint64_t free_bytes = 0;     // free at discovery time
};

// A node of the machine that the topology leaves out, and why.
struct ExcludedNode {
  int id = 0;
  std::string reason;  // e.g. "no allowed CPUs", "memory not allowed"
};

struct SimulationOptions {
  // Virtual node count, 1..kMaxSimulatedNodes.
  int nodes = 2;
  // Distance between two different virtual nodes; must exceed
  // kLocalDistance and fit the SLIT byte (255).
  int remote_distance = kDefaultRemoteDistance;
  // The virtual nodes' ids, ascending and below kMaxSimulatedNodes; their
  // count must be `nodes`. Empty: 0..nodes-1. Ids need not start at 0, as
  // on a real machine where a process is confined to some of its nodes:
  // {1} is what a pod pinned to node 1 of a two-node host sees.
  std::vector<int> ids;
};

// What the kernel says about the process's placement, read from /proc and
// /sys without libnuma, so that it is known even when memory policy is
// refused (and the topology falls back to one unbound node 0). In a
// Kubernetes pod pinned by the CPU and Memory Managers this names the real
// node(s) of the pod's cpuset.
struct CpusetInfo {
  // The cpuset cgroup (cgroup v1) or the unified cgroup (v2) of the process,
  // from /proc/self/cgroup; "" if unknown.
  std::string cgroup;
  // /proc/self/status Mems_allowed_list: the memory nodes the cpuset
  // allows, in the kernel's list format ("0-1"); "" if unknown.
  std::string mems_allowed;
  // /sys/devices/system/node/online ("0-1"); "" if sysfs has no node
  // information (a kernel without NUMA).
  std::string online_nodes;
  // The nodes that hold at least one allowed CPU, from
  // /sys/devices/system/node/node<k>/cpulist; ascending.
  std::vector<int> cpu_nodes;
};

class Topology {
 public:
  // The machine's topology as the calling thread may use it. Fails with
  // kInvalidTopology when no node has both an allowed CPU and allowed memory.
  static absl::StatusOr<Topology> Discover();

  // N virtual nodes over the calling thread's allowed CPUs. Fails with
  // kInvalidTopology for a node count or distance out of range.
  static absl::StatusOr<Topology> Simulate(const SimulationOptions& options);

  bool simulated() const { return simulated_; }
  // Whether the process can bind memory to nodes: the kernel supports NUMA
  // and the memory-policy system calls are permitted. Always false for a
  // simulated topology.
  bool numa_available() const { return numa_available_; }
  // Why a discovered topology has no NUMA support; "" otherwise.
  const std::string& numa_unavailable_reason() const {
    return numa_unavailable_reason_;
  }

  // CPUs and memory nodes the process may use, as seen by Discover() or
  // Simulate(); ascending.
  const std::vector<int>& allowed_cpus() const { return allowed_cpus_; }
  const std::vector<int>& allowed_memory_nodes() const {
    return allowed_memory_nodes_;
  }

  // Usable nodes in ascending id order; never empty.
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  int node_count() const { return static_cast<int>(nodes_.size()); }
  std::vector<int> node_ids() const;
  const std::vector<ExcludedNode>& excluded_nodes() const {
    return excluded_nodes_;
  }

  // The node with this id, or nullptr.
  const NodeInfo* FindNode(int node) const;
  // OK if `node` is usable; otherwise kNoSuchNode with a message naming the
  // node and the usable set.
  absl::Status CheckNode(int node) const;
  // Distance between two usable nodes; -1 if either is not usable.
  int Distance(int from, int to) const;

  // The kernel's view of this process's cpuset (see CpusetInfo); a
  // simulated topology carries the real one it was split from.
  const CpusetInfo& cpuset() const { return cpuset_; }

  // A multi-line report for people: kind, allowed CPUs and memory nodes,
  // each node's CPUs and memory, excluded nodes, the distance matrix.
  std::string ToString() const;

  // One line for a server's start-up log: the nodes served and where they
  // came from (allowed CPUs, Mems_allowed, excluded nodes and why, the
  // cgroup), e.g.
  //   numa: serving node(s) 1 of 0-1 online (node 1: CPUs 16-31 (16),
  //   62.8 GiB); allowed CPUs 16-31 (16), Mems_allowed 1; excluded node 0
  //   (no allowed CPUs); cgroup /kubepods.slice/...
  // Without memory policy or when simulated, it says so and adds the nodes
  // the cpuset's CPUs are really on.
  std::string Summary() const;

 private:
  Topology() = default;

  bool simulated_ = false;
  bool numa_available_ = false;
  std::string numa_unavailable_reason_;
  std::vector<int> allowed_cpus_;
  std::vector<int> allowed_memory_nodes_;
  std::vector<NodeInfo> nodes_;
  std::vector<ExcludedNode> excluded_nodes_;
  CpusetInfo cpuset_;
};

// Formats ascending ids the way the kernel does ("0-3,8,10-11"); "" if empty.
std::string FormatIdList(std::span<const int> ids);

// Parses the kernel's list format back into ascending ids; trailing
// whitespace is ignored. InvalidArgument for anything else.
absl::StatusOr<std::vector<int>> ParseIdList(absl::string_view list);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_NUMATIC_TOPOLOGY_H_
