#include "engine/numatic/topology.h"

#include <numa.h>
#include <numaif.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <utility>

#include <absl/base/attributes.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/synchronization/mutex.h>

#include "engine/common/error.h"
#include "engine/numatic/error_status.h"

namespace furrballs {
namespace {

// libnuma fills per-node caches lazily (numa_node_to_cpus) without locking,
// so concurrent discoveries take turns.
ABSL_CONST_INIT absl::Mutex libnuma_mutex(absl::kConstInit);

// The CPUs the calling thread may run on. The set is sized dynamically so
// that machines with more than CPU_SETSIZE (1024) CPUs work too.
absl::StatusOr<std::vector<int>> AllowedCpusOfCallingThread() {
  for (int capacity = CPU_SETSIZE;; capacity *= 2) {
    cpu_set_t* set = CPU_ALLOC(capacity);
    if (set == nullptr) {
      return ErrorStatus(Error::kAllocationFailed, "CPU_ALLOC failed");
    }
    const size_t set_bytes = CPU_ALLOC_SIZE(capacity);
    CPU_ZERO_S(set_bytes, set);
    if (sched_getaffinity(0, set_bytes, set) != 0) {
      const int err = errno;
      CPU_FREE(set);
      if (err == EINVAL && capacity < (1 << 20)) continue;  // set too small
      return ErrorStatus(Error::kInvalidTopology,
                         absl::StrCat("sched_getaffinity: ", strerror(err)));
    }
    std::vector<int> cpus;
    for (int cpu = 0; cpu < capacity; ++cpu) {
      if (CPU_ISSET_S(cpu, set_bytes, set)) cpus.push_back(cpu);
    }
    CPU_FREE(set);
    return cpus;
  }
}

// Why this process cannot use NUMA memory policy, or "" if it can.
// libnuma's numa_available() only recognizes ENOSYS (a kernel without NUMA),
// but Docker's default seccomp profile answers EPERM to get_mempolicy, mbind
// and move_pages in containers without CAP_SYS_NICE; libnuma then calls NUMA
// available while every policy call fails. Either way this process cannot
// place memory, so both get the one-node topology.
std::string NumaUnavailableReason() {
  if (get_mempolicy(nullptr, nullptr, 0, nullptr, 0) == 0) return "";
  const int err = errno;
  if (err == ENOSYS) return "the kernel has no NUMA support";
  return absl::StrCat("get_mempolicy is refused (", strerror(err),
                      "); a container needs CAP_SYS_NICE or a seccomp "
                      "profile that allows the memory-policy system calls");
}

// Physical memory when there is no per-node information.
void MachineMemory(uint64_t* total, uint64_t* free) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  *total = page * static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES));
  *free = page * static_cast<uint64_t>(sysconf(_SC_AVPHYS_PAGES));
}

std::string FormatBytes(uint64_t bytes) {
  constexpr uint64_t kMiB = uint64_t{1} << 20;
  constexpr uint64_t kGiB = uint64_t{1} << 30;
  if (bytes >= kGiB) {
    return absl::StrFormat("%.1f GiB", static_cast<double>(bytes) / kGiB);
  }
  return absl::StrFormat("%.1f MiB", static_cast<double>(bytes) / kMiB);
}

std::string ExcludedText(const std::vector<ExcludedNode>& excluded) {
  std::string out;
  for (const ExcludedNode& node : excluded) {
    absl::StrAppend(&out, "; node ", node.id, ": ", node.reason);
  }
  return out;
}

// The first line of a file, "" if it cannot be read.
std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return std::string(absl::StripAsciiWhitespace(line));
}

// The cpuset cgroup of the process: the cgroup v1 hierarchy that carries the
// cpuset controller if there is one, else the unified (v2) hierarchy.
std::string CgroupOfProcess() {
  std::ifstream in("/proc/self/cgroup");
  std::string line;
  std::string unified;
  while (std::getline(in, line)) {
    // hierarchy-id:controller-list:path
    std::vector<std::string> fields = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (fields.size() != 3) continue;
    if (fields[0] == "0" && fields[1].empty()) {
      unified = fields[2];
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(fields[1], ',')) {
      if (controller == "cpuset") return fields[2];
    }
  }
  return unified;
}

// Mems_allowed_list of /proc/self/status.
std::string MemsAllowedOfProcess() {
  std::ifstream in("/proc/self/status");
  std::string line;
  constexpr absl::string_view kKey = "Mems_allowed_list:";
  while (std::getline(in, line)) {
    if (absl::StartsWith(line, kKey)) {
      return std::string(
          absl::StripAsciiWhitespace(absl::string_view(line).substr(kKey.size())));
    }
  }
  return "";
}

// The kernel's view of the cpuset, without libnuma.
CpusetInfo ReadCpuset(const std::vector<int>& allowed_cpus) {
  CpusetInfo info;
  info.cgroup = CgroupOfProcess();
  info.mems_allowed = MemsAllowedOfProcess();
  info.online_nodes = ReadFirstLine("/sys/devices/system/node/online");
  absl::StatusOr<std::vector<int>> online = ParseIdList(info.online_nodes);
  if (!online.ok()) return info;
  for (int node : *online) {
    absl::StatusOr<std::vector<int>> cpus = ParseIdList(ReadFirstLine(
        absl::StrCat("/sys/devices/system/node/node", node, "/cpulist")));
    if (!cpus.ok()) continue;
    for (int cpu : *cpus) {
      if (std::binary_search(allowed_cpus.begin(), allowed_cpus.end(), cpu)) {
        info.cpu_nodes.push_back(node);
        break;
      }
    }
  }
  return info;
}

}  // namespace

absl::StatusOr<std::vector<int>> ParseIdList(absl::string_view list) {
  std::vector<int> ids;
  list = absl::StripAsciiWhitespace(list);
  if (list.empty()) return ids;
  const auto number = [](absl::string_view text, int* out) {
    const auto [end, error] =
        std::from_chars(text.data(), text.data() + text.size(), *out);
    return error == std::errc() && end == text.data() + text.size() &&
           *out >= 0;
  };
  for (absl::string_view range : absl::StrSplit(list, ',')) {
    const size_t dash = range.find('-');
    const absl::string_view low = range.substr(0, dash);
    const absl::string_view high =
        dash == absl::string_view::npos ? low : range.substr(dash + 1);
    int first = 0;
    int last = 0;
    if (!number(low, &first) || !number(high, &last) ||
        last < first || (!ids.empty() && first <= ids.back())) {
      return absl::InvalidArgumentError(
          absl::StrCat("not an ascending id list: \"", list, "\""));
    }
    for (int id = first; id <= last; ++id) ids.push_back(id);
  }
  return ids;
}

std::string FormatIdList(std::span<const int> ids) {
  std::string out;
  size_t i = 0;
  while (i < ids.size()) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    absl::StrAppend(&out, ids[i]);
    if (j > i) absl::StrAppend(&out, "-", ids[j]);
    i = j + 1;
  }
  return out;
}

absl::StatusOr<Topology> Topology::Discover() {
  absl::StatusOr<std::vector<int>> allowed = AllowedCpusOfCallingThread();
  if (!allowed.ok()) return allowed.status();

  Topology topology;
  topology.allowed_cpus_ = *std::move(allowed);
  topology.cpuset_ = ReadCpuset(topology.allowed_cpus_);

  absl::MutexLock lock(&libnuma_mutex);
  topology.numa_unavailable_reason_ = NumaUnavailableReason();
  if (!topology.numa_unavailable_reason_.empty()) {
    NodeInfo node;
    node.id = 0;
    node.cpus = topology.allowed_cpus_;
    node.distances = {kLocalDistance};
    MachineMemory(&node.memory_bytes, &node.free_bytes);
    topology.allowed_memory_nodes_ = {0};
    topology.nodes_.push_back(std::move(node));
    return topology;
  }
  topology.numa_available_ = true;

  // Both masks come from libnuma's allocator and go back to it.
  struct bitmask* mems_allowed = numa_get_mems_allowed();
  struct bitmask* node_cpus = numa_allocate_cpumask();
  const int max_node = numa_max_node();
  for (int id = 0; id <= max_node; ++id) {
    if (!numa_bitmask_isbitset(numa_nodes_ptr, id)) continue;  // not present
    const bool memory_allowed = numa_bitmask_isbitset(mems_allowed, id);
    if (memory_allowed) topology.allowed_memory_nodes_.push_back(id);

    NodeInfo node;
    node.id = id;
    if (numa_node_to_cpus(id, node_cpus) == 0) {
      for (int cpu : topology.allowed_cpus_) {
        if (numa_bitmask_isbitset(node_cpus, cpu)) node.cpus.push_back(cpu);
      }
    }
    if (node.cpus.empty() || !memory_allowed) {
      topology.excluded_nodes_.push_back(ExcludedNode{
          id, node.cpus.empty() ? "no allowed CPUs" : "memory not allowed"});
      continue;
    }
    long long free_bytes = 0;
    const long long size = numa_node_size64(id, &free_bytes);
    node.memory_bytes = size > 0 ? static_cast<uint64_t>(size) : 0;
    node.free_bytes = free_bytes > 0 ? static_cast<uint64_t>(free_bytes) : 0;
    topology.nodes_.push_back(std::move(node));
  }
  numa_free_cpumask(node_cpus);
  numa_free_nodemask(mems_allowed);

  if (topology.nodes_.empty()) {
    return ErrorStatus(
        Error::kInvalidTopology,
        absl::StrCat("no NUMA node has both an allowed CPU and allowed "
                     "memory (allowed CPUs: ",
                     FormatIdList(topology.allowed_cpus_),
                     "; allowed memory nodes: ",
                     FormatIdList(topology.allowed_memory_nodes_), ")",
                     ExcludedText(topology.excluded_nodes_)));
  }
  for (NodeInfo& from : topology.nodes_) {
    for (const NodeInfo& to : topology.nodes_) {
      // numa_distance returns 0 when the firmware has no SLIT; fall back to
      // the distances Linux itself assumes then (10 local, 20 remote).
      int distance = numa_distance(from.id, to.id);
      if (distance <= 0) distance = from.id == to.id ? kLocalDistance : 20;
      from.distances.push_back(distance);
    }
  }
  return topology;
}

absl::StatusOr<Topology> Topology::Simulate(const SimulationOptions& options) {
  if (options.nodes < 1 || options.nodes > kMaxSimulatedNodes) {
    return ErrorStatus(
        Error::kInvalidTopology,
        absl::StrCat("cannot simulate ", options.nodes,
                     " nodes; the count must be 1..", kMaxSimulatedNodes));
  }
  if (options.remote_distance <= kLocalDistance ||
      options.remote_distance > 255) {
    return ErrorStatus(
        Error::kInvalidTopology,
        absl::StrCat("simulated remote distance ", options.remote_distance,
                     " must be in ", kLocalDistance + 1, "..255"));
  }
  if (!options.ids.empty()) {
    bool ascending = true;
    for (size_t i = 0; i < options.ids.size(); ++i) {
      ascending &= options.ids[i] >= 0 && options.ids[i] < kMaxSimulatedNodes &&
                   (i == 0 || options.ids[i - 1] < options.ids[i]);
    }
    if (static_cast<int>(options.ids.size()) != options.nodes || !ascending) {
      return ErrorStatus(
          Error::kInvalidTopology,
          absl::StrCat("simulated node ids ", absl::StrJoin(options.ids, ","),
                       " must be ", options.nodes,
                       " ascending ids below ", kMaxSimulatedNodes));
    }
  }
  // Start from the real topology so that the CPUs and memory shared out are
  // exactly the ones this process may use.
  absl::StatusOr<Topology> real = Discover();
  if (!real.ok()) return real.status();

  Topology topology;
  topology.simulated_ = true;
  topology.allowed_cpus_ = real->allowed_cpus_;
  topology.allowed_memory_nodes_ = real->allowed_memory_nodes_;
  topology.cpuset_ = real->cpuset_;
  uint64_t total_memory = 0;
  uint64_t free_memory = 0;
  for (const NodeInfo& node : real->nodes_) {
    total_memory += node.memory_bytes;
    free_memory += node.free_bytes;
  }

  const std::vector<int>& cpus = topology.allowed_cpus_;
  const size_t cpu_count = cpus.size();
  const size_t node_count = static_cast<size_t>(options.nodes);
  for (size_t k = 0; k < node_count; ++k) {
    NodeInfo node;
    node.id = options.ids.empty() ? static_cast<int>(k) : options.ids[k];
    if (cpu_count >= node_count) {
      // Contiguous slices whose sizes differ by at most one CPU.
      for (size_t c = k * cpu_count / node_count;
           c < (k + 1) * cpu_count / node_count; ++c) {
        node.cpus.push_back(cpus[c]);
      }
    } else {
      node.cpus.push_back(cpus[k % cpu_count]);
    }
    for (size_t other = 0; other < node_count; ++other) {
      node.distances.push_back(other == k ? kLocalDistance
                                          : options.remote_distance);
    }
    node.memory_bytes = total_memory / node_count;
    node.free_bytes = free_memory / node_count;
    topology.nodes_.push_back(std::move(node));
  }
  return topology;
}

std::vector<int> Topology::node_ids() const {
  std::vector<int> ids;
  ids.reserve(nodes_.size());
  for (const NodeInfo& node : nodes_) ids.push_back(node.id);
  return ids;
}

const NodeInfo* Topology::FindNode(int node) const {
  // Node counts are small (≤ 64), so a scan beats building an index.
  for (const NodeInfo& info : nodes_) {
    if (info.id == node) return &info;
  }
  return nullptr;
}

absl::Status Topology::CheckNode(int node) const {
  if (FindNode(node) != nullptr) return absl::OkStatus();
  const std::vector<int> ids = node_ids();
  std::string message = absl::StrCat(
      "node ", node, " is not in this ",
      simulated_ ? "simulated" : "discovered", " topology; usable nodes are ",
      FormatIdList(ids), " (allowed CPUs ", FormatIdList(allowed_cpus_), ")");
  for (const ExcludedNode& excluded : excluded_nodes_) {
    if (excluded.id == node) {
      absl::StrAppend(&message, "; node ", node, " exists but is excluded: ",
                      excluded.reason);
    }
  }
  return ErrorStatus(Error::kNoSuchNode, message);
}

int Topology::Distance(int from, int to) const {
  const NodeInfo* source = FindNode(from);
  if (source == nullptr) return -1;
  for (size_t i = 0; i < nodes_.size(); ++i) {
    if (nodes_[i].id == to) return source->distances[i];
  }
  return -1;
}

std::string Topology::ToString() const {
  std::string out;
  if (simulated_) {
    absl::StrAppend(&out, "topology: simulated, ", nodes_.size(),
                    " virtual node(s) over the allowed CPUs",
                    allowed_cpus_.size() < nodes_.size()
                        ? " (fewer CPUs than nodes: nodes share CPUs "
                          "round-robin)"
                        : "",
                    "; memory is allocated locally, not bound\n");
  } else {
    absl::StrAppend(&out, "topology: discovered, ", nodes_.size(),
                    " usable node(s)",
                    numa_available_ ? "" : " (NUMA unavailable: ",
                    numa_unavailable_reason_, numa_available_ ? "" : ")",
                    "\n");
  }
  absl::StrAppend(&out, "allowed CPUs: ", FormatIdList(allowed_cpus_), " (",
                  allowed_cpus_.size(), ")\n");
  absl::StrAppend(&out, "allowed memory nodes: ",
                  FormatIdList(allowed_memory_nodes_), "\n");
  for (const NodeInfo& node : nodes_) {
    absl::StrAppend(&out, "node ", node.id, ": CPUs ", FormatIdList(node.cpus),
                    " (", node.cpus.size(), "), memory ",
                    FormatBytes(node.memory_bytes), " (free ",
                    FormatBytes(node.free_bytes), ")\n");
  }
  for (const ExcludedNode& excluded : excluded_nodes_) {
    absl::StrAppend(&out, "excluded node ", excluded.id, ": ", excluded.reason,
                    "\n");
  }
  absl::StrAppend(&out, "distances:\n  node");
  for (const NodeInfo& node : nodes_) {
    absl::StrAppend(&out, absl::StrFormat("%5d", node.id));
  }
  out += '\n';
  for (const NodeInfo& node : nodes_) {
    absl::StrAppend(&out, absl::StrFormat("  %4d", node.id));
    for (int distance : node.distances) {
      absl::StrAppend(&out, absl::StrFormat("%5d", distance));
    }
    out += '\n';
  }
  return out;
}

std::string Topology::Summary() const {
  std::string out = "numa: ";
  const std::string allowed =
      absl::StrCat(FormatIdList(allowed_cpus_), " (", allowed_cpus_.size(), ")");
  if (simulated_) {
    absl::StrAppend(&out, "simulated ", nodes_.size(),
                    " node(s) over allowed CPUs ", allowed,
                    ", memory not bound");
  } else if (!numa_available_) {
    absl::StrAppend(&out, "memory policy unavailable (",
                    numa_unavailable_reason_,
                    "): one unbound node 0 over allowed CPUs ", allowed);
  } else {
    absl::StrAppend(&out, "serving node(s) ", FormatIdList(node_ids()), " of ",
                    cpuset_.online_nodes.empty() ? "?" : cpuset_.online_nodes,
                    " online (");
    for (size_t i = 0; i < nodes_.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "" : "; ", "node ", nodes_[i].id,
                      ": CPUs ", FormatIdList(nodes_[i].cpus), " (",
                      nodes_[i].cpus.size(), "), ",
                      FormatBytes(nodes_[i].memory_bytes));
    }
    absl::StrAppend(&out, "); allowed CPUs ", allowed);
  }
  if (simulated_ || !numa_available_) {
    // The node labels above are not the kernel's; say where the cpuset is.
    absl::StrAppend(&out, "; the allowed CPUs are on node(s) ",
                    cpuset_.cpu_nodes.empty() ? "?" : FormatIdList(cpuset_.cpu_nodes),
                    " of ",
                    cpuset_.online_nodes.empty() ? "?" : cpuset_.online_nodes,
                    " online");
  }
  absl::StrAppend(&out, ", Mems_allowed ",
                  cpuset_.mems_allowed.empty() ? "?" : cpuset_.mems_allowed);
  if (!excluded_nodes_.empty()) {
    out += "; excluded ";
    for (size_t i = 0; i < excluded_nodes_.size(); ++i) {
      absl::StrAppend(&out, i == 0 ? "" : ", ", "node ", excluded_nodes_[i].id,
                      " (", excluded_nodes_[i].reason, ")");
    }
  }
  absl::StrAppend(&out, "; cgroup ",
                  cpuset_.cgroup.empty() ? "?" : cpuset_.cgroup);
  return out;
}

}  // namespace furrballs
