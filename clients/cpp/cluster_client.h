// clients/cpp/cluster_client.h: a client of several Furrballs servers that
// shards keys across them by rendezvous hashing (clients/cpp/rendezvous.h).
//
// Thread safety: thread-safe. Calls, SetEndpoints() and Resolve() may run
// concurrently from any threads; a call uses the member set that was current
// when it started.
//
// Membership. The endpoints come from a list (FromEndpoints, SetEndpoints) or
// from a DNS name (FromDns: every address the name resolves to, e.g. the pods
// behind a Kubernetes headless Service). A DNS cluster re-resolves every
// resolve_interval on a background thread, and on demand with Resolve(). A
// resolution that fails or returns no address keeps the previous members: a
// DNS hiccup must not empty the cache. Endpoints that stay in the set keep
// their connection.
//
// Failure policy: a dead endpoint costs only its own keys. The cache is not
// replicated, so a key is never sent anywhere but its owner:
//   - Calls for keys owned by an unreachable endpoint fail with UNAVAILABLE;
//     keys of every other endpoint are unaffected.
//   - After an endpoint answers UNAVAILABLE it is marked down for
//     down_interval: its keys' calls fail at once with UNAVAILABLE, without a
//     network round trip or a wait for the deadline (useful when a host
//     vanishes without resetting connections). The first call after the
//     interval goes to the network again, and success clears the mark.
//   - Keys are not re-homed while their owner is down. Failing over to the
//     next-ranked endpoint would trade an outage for stale reads: once the
//     owner is reachable again, reads go back to it and return the copy it
//     held before, which the writes made to the stand-in never reached.
//     Ownership changes only when the member set changes, and then only for
//     the keys whose rendezvous owner changed: adding the n-th endpoint moves
//     about 1/n of the keys, removing one moves only its keys, and a server
//     restarted at the same address keeps all of its keys (its cache is
//     cold, so they miss until rewritten).
//   - MultiGet/MultiSet split the batch by owner, send the parts in
//     parallel, and put the results back in request order; the items of a
//     failed part carry that part's status, the others succeed normally.
#ifndef FURRBALLS_CLIENTS_CPP_CLUSTER_CLIENT_H_
#define FURRBALLS_CLIENTS_CPP_CLUSTER_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/container/flat_hash_map.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/types/span.h>

#include "clients/cpp/client.h"
#include "clients/cpp/rendezvous.h"

namespace furrballs::client {

// Address families a DNS name may resolve to.
enum class AddressFamily { kAny, kIPv4, kIPv6 };

// Turns "host:port" into endpoints ("ip:port", "[ipv6]:port").
using Resolver = std::function<absl::StatusOr<std::vector<std::string>>(
    const std::string& host_port, AddressFamily family)>;

struct ClusterOptions {
  // Settings of each endpoint's Client (deadlines, credentials, ...).
  ClientOptions client;
  // Seed of the rendezvous hash. Every client of a cluster must use the same
  // seed (and the same endpoint strings) to agree on key owners.
  uint64_t hash_seed = 0;
  // How long an endpoint that answered UNAVAILABLE is skipped (its keys fail
  // at once). Zero disables the mark: every call goes to the network.
  std::chrono::milliseconds down_interval{1000};
  // DNS clusters: period of background re-resolution; zero means only on
  // demand (Resolve()).
  std::chrono::milliseconds resolve_interval{10000};
  AddressFamily address_family = AddressFamily::kAny;
  // Name resolution; unset means getaddrinfo(3) (ResolveWithGetaddrinfo).
  Resolver resolver;
};

// The statistics of one endpoint, or why they could not be read.
struct EndpointStats {
  std::string endpoint;
  absl::StatusOr<std::vector<NodeStats>> nodes;
};

class ClusterClient {
 public:
  // A cluster of the given "host:port" endpoints (order and duplicates do not
  // matter). INVALID_ARGUMENT if the list is empty.
  static absl::StatusOr<std::unique_ptr<ClusterClient>> FromEndpoints(
      std::vector<std::string> endpoints, ClusterOptions options = {});

  // A cluster of every address `host_port` resolves to. Fails if the first
  // resolution fails or finds no address.
  static absl::StatusOr<std::unique_ptr<ClusterClient>> FromDns(
      std::string host_port, ClusterOptions options = {});

  // Stops the re-resolution thread; waits for calls' async parts.
  ~ClusterClient();
  ClusterClient(const ClusterClient&) = delete;
  ClusterClient& operator=(const ClusterClient&) = delete;

  // Replaces the member set. INVALID_ARGUMENT (and no change) if empty.
  absl::Status SetEndpoints(std::vector<std::string> endpoints);
  // DNS clusters: resolves the name now and applies the result.
  // FAILED_PRECONDITION for a cluster made from a list.
  absl::Status Resolve();

  // Connects to every member and waits up to `timeout` for all of them to be
  // ready; a ready member's down mark is cleared. UNAVAILABLE naming the
  // members that were not ready in time.
  absl::Status WaitForReady(std::chrono::milliseconds timeout);

  // The current members, sorted.
  std::vector<std::string> endpoints() const;
  // The endpoint that owns `key` in the current member set.
  std::string OwnerOf(absl::string_view key) const;

  // Single-key calls go to the key's owner; see Client for their meaning.
  absl::StatusOr<std::optional<Entry>> Get(absl::string_view key,
                                           const CallOptions& call = {});
  absl::StatusOr<uint64_t> Set(absl::string_view key, absl::string_view value,
                               const SetOptions& options = {},
                               const CallOptions& call = {});
  absl::StatusOr<bool> Delete(absl::string_view key,
                              const CallOptions& call = {});
  absl::Status Touch(absl::string_view key, uint64_t ttl_ms,
                     const CallOptions& call = {});

  // One result per key, in request order; a key whose owner failed carries
  // that owner's status, a key the owner rejected its own (Client::MultiGet).
  std::vector<absl::StatusOr<std::optional<Entry>>> MultiGet(
      absl::Span<const std::string> keys, const CallOptions& call = {});
  // One result per item, in request order.
  std::vector<absl::StatusOr<uint64_t>> MultiSet(
      absl::Span<const SetItem> items, const CallOptions& call = {});
  // Every endpoint's statistics, in endpoints() order.
  std::vector<EndpointStats> Stats(const CallOptions& call = {});

 private:
  // One member: its client and its down mark.
  struct Endpoint {
    explicit Endpoint(const std::string& address, const ClientOptions& options)
        : address(address), client(address, options) {}
    const std::string address;
    Client client;
    // Steady-clock nanoseconds until which the endpoint is skipped; 0 when
    // up. Relaxed: a stale read only sends or skips one extra call.
    std::atomic<int64_t> down_until_ns{0};
  };
  // An immutable member set; calls hold a reference for their duration, so a
  // concurrent SetEndpoints never pulls a client out from under a call.
  struct Members {
    Rendezvous ring;
    std::vector<std::shared_ptr<Endpoint>> endpoints;  // endpoints[i] is
                                                       // ring.endpoints()[i]
  };

  ClusterClient(ClusterOptions options, std::string dns_name);

  std::shared_ptr<const Members> members() const;
  // The owner of `key`, or UNAVAILABLE if it is marked down.
  absl::StatusOr<Endpoint*> Route(const Members& m, absl::string_view key) const;
  absl::Status CheckUp(Endpoint* e) const;
  // Records a call's outcome in the endpoint's down mark.
  void Observe(Endpoint* e, const absl::Status& status) const;
  void ResolveLoop();

  const ClusterOptions options_;
  const std::string dns_name_;  // empty for a list cluster

  mutable absl::Mutex mu_;
  std::shared_ptr<const Members> members_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread resolver_thread_;
};

// getaddrinfo(3)-based resolution of "host:port" (or "[v6]:port"): every
// distinct address of the family, formatted as an endpoint, sorted.
absl::StatusOr<std::vector<std::string>> ResolveWithGetaddrinfo(
    const std::string& host_port, AddressFamily family);

}  // namespace furrballs::client

#endif  // FURRBALLS_CLIENTS_CPP_CLUSTER_CLIENT_H_
