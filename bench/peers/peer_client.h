// bench/peers/peer_client.h: one connection to a cache server under test, as
// the peers driver sees it: a batch of reads and writes goes out, the call
// returns when every one has been answered.
//
// Thread safety: thread-compatible. Each driver thread owns its own
// PeerClient (its own connection); nothing is shared between them, except
// that the threads of furrballs_shared share one client (below).
//
// Depth. Execute(ops) puts all of ops.size() operations in flight at once, as
// far as the backend's protocol allows, and records when each one was
// answered. A batch of one is a plain request/response; a batch of 16 is
// pipelining depth 16:
// - furrballs:           unary RPCs, all 16 started asynchronously.
// - furrballs_batched:   the same calls through the client's automatic
//                        batching: 16 concurrent callers of one client, whose
//                        calls share Batch messages (a lone synchronous call
//                        at depth 1 goes unary).
// - furrballs_pipeline:  the bidirectional Pipeline stream, 16 in flight.
// - furrballs_multi:     one MultiGet for the batch's reads and one MultiSet
//                        for its writes, both in flight together.
// - furrballs_shared:    as furrballs_batched, but every driver thread of a
//                        cell calls one shared client, so N threads at
//                        depth 1 are N concurrent synchronous callers of one
//                        client (the many-callers cells of run.py).
// - redis:               hiredis, 16 commands written before the replies are
//                        read (RESP pipelining).
// - memcached:           libmemcached; the batch's reads are one multi-get
//                        (memcached_mget); its writes go one after another,
//                        each acknowledged, because libmemcached has no
//                        acknowledged pipelined set (buffered or no-reply sets
//                        would count writes the server never confirmed).
#ifndef FURRBALLS_BENCH_PEERS_PEER_CLIENT_H_
#define FURRBALLS_BENCH_PEERS_PEER_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/statusor.h>
#include <absl/types/span.h>

namespace furrballs::bench::peers {

enum class OpType : uint8_t { kGet, kSet };

struct PeerOp {
  OpType type = OpType::kGet;
  std::string key;
  // kSet: the value to write. kGet: the value read, on a hit.
  std::string value;
  // Set by Execute. kGet: true on a hit. kSet: true once acknowledged.
  bool ok = false;
  // Set by Execute: the server or the connection failed this operation.
  bool failed = false;
  // Set by Execute: steady-clock nanoseconds (NowNs) when the answer arrived.
  uint64_t done_ns = 0;
};

// What a server says it holds (bench/memory's fill test reads it).
struct ServerCounts {
  // Redis DBSIZE, memcached `stats` curr_items, Furrballs' Stats live_keys
  // summed over nodes.
  uint64_t resident_keys = 0;
  // Furrballs only (-1 elsewhere), summed over nodes: Stats live_bytes (value
  // bytes of live entries) and memory_limit_bytes (the value pages).
  int64_t live_bytes = -1;
  int64_t memory_limit_bytes = -1;
};

class PeerClient {
 public:
  virtual ~PeerClient() = default;

  // Runs every op of `ops` (see Depth above) and returns when all have been
  // answered. A non-OK status means the connection is unusable; per-operation
  // failures only set `failed`.
  virtual absl::Status Execute(absl::Span<PeerOp> ops) = 0;

  // Asks the server what it holds, on this connection.
  virtual absl::StatusOr<ServerCounts> Counts() = 0;
};

// Steady-clock nanoseconds: the one clock of the driver.
uint64_t NowNs();

// The backend names MakePeerClient accepts, in the order above.
const std::vector<std::string>& PeerBackendNames();

// Connects to the server at `address` ("host:port") with the named backend.
absl::StatusOr<std::unique_ptr<PeerClient>> MakePeerClient(
    const std::string& backend, const std::string& address);

// Each backend's factory (peer_client.cc dispatches on the name).
absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsUnaryClient(
    const std::string& address);
absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsBatchedClient(
    const std::string& address);
absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsPipelineClient(
    const std::string& address);
absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsMultiClient(
    const std::string& address);
absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsSharedClient(
    const std::string& address);
absl::StatusOr<std::unique_ptr<PeerClient>> MakeRedisClient(
    const std::string& address);
absl::StatusOr<std::unique_ptr<PeerClient>> MakeMemcachedClient(
    const std::string& address);

}  // namespace furrballs::bench::peers

#endif  // FURRBALLS_BENCH_PEERS_PEER_CLIENT_H_
