// engine/furrball/node_router.h: NodeRouter, the one place that says which
// node serves a key and how a node's id relates to its index.
//
// Thread safety: immutable after construction; share it freely.
//
// A node has two numbers, and mixing them up is a bug that only shows on a
// machine whose served nodes are not 0..N-1 (a pod pinned to node 1):
//   id     the kernel's NUMA node number (Numatic, FurrBall::SubmitToNode,
//          NodeStatsSnapshot::node, every metric's `node` label);
//   index  0..count()-1, the position in the served set: what per-node
//          arrays (shards, workers, dispatch queues) are indexed by.
// Code converts with IdOf / IndexOf here and nowhere else.
#ifndef FURRBALLS_ENGINE_FURRBALL_NODE_ROUTER_H_
#define FURRBALLS_ENGINE_FURRBALL_NODE_ROUTER_H_

#include <cstdint>
#include <utility>
#include <vector>

#include "engine/common/hash_pair.h"

namespace furrballs {

class NodeRouter {
 public:
  // `ids`: the served nodes' ids by index; distinct and not empty.
  explicit NodeRouter(std::vector<int> ids) : ids_(std::move(ids)) {}

  int count() const { return static_cast<int>(ids_.size()); }
  const std::vector<int>& ids() const { return ids_; }

  // REQUIRES: 0 <= index < count().
  int IdOf(int index) const { return ids_[index]; }
  // The index of node `id`; -1 if it is not served.
  int IndexOf(int id) const {
    for (int i = 0; i < count(); ++i) {
      if (ids_[i] == id) return i;
    }
    return -1;
  }
  // The index of node `id`, or 0 for a node not served: where a search
  // from a thread on `id` starts (a thread running elsewhere starts at the
  // first node).
  int IndexOrFirst(int id) const {
    const int i = IndexOf(id);
    return i < 0 ? 0 : i;
  }

  // The index of the node that owns `h` under hash routing, which is also
  // the home of every key's write lock under any routing. Uses H1's high
  // half: CMap picks its group from H1's low bits and ARC's index from H2,
  // so the node choice skews neither table.
  int HomeIndex(const HashPair& h) const {
    return static_cast<int>(((h.h1 >> 32) * ids_.size()) >> 32);
  }

 private:
  std::vector<int> ids_;
};

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_NODE_ROUTER_H_
