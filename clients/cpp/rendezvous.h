// clients/cpp/rendezvous.h: rendezvous (highest-random-weight) hashing of keys
// onto a set of endpoints.
//
// Thread safety: a Rendezvous is immutable after construction and safe to
// share between threads.
//
// Every (endpoint, key) pair gets a pseudo-random score; a key belongs to the
// endpoint with the highest score. Because a key's score on one endpoint does
// not depend on which other endpoints exist, changing the member set moves
// only the keys that must move: removing an endpoint moves exactly its own
// keys, adding the n-th endpoint takes about 1/n of the keys (all from the
// others, none between the others), and restarting a server at the same
// address moves nothing. The score is XXH3-64 of the key, seeded with a
// per-endpoint seed that is itself XXH3-64 of the endpoint string under the
// cluster's seed, so all clients that agree on the seed and the endpoint
// strings agree on every owner. Ties (probability 2^-64 per pair) go to the
// smaller endpoint string so that the choice stays deterministic.
//
// Cost: one XXH3 of the key per endpoint, meant for clusters of up to a few
// dozen endpoints.
#ifndef FURRBALLS_CLIENTS_CPP_RENDEZVOUS_H_
#define FURRBALLS_CLIENTS_CPP_RENDEZVOUS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <absl/strings/string_view.h>

namespace furrballs::client {

class Rendezvous {
 public:
  // `endpoints` may be in any order and is kept sorted and deduplicated;
  // indices returned by Owner() refer to endpoints().
  explicit Rendezvous(std::vector<std::string> endpoints, uint64_t seed = 0);

  // Index into endpoints() of the owner of `key`. REQUIRES: !empty().
  size_t Owner(absl::string_view key) const;

  // The score of `key` on endpoints()[index]; exposed for tests.
  uint64_t Score(size_t index, absl::string_view key) const;

  const std::vector<std::string>& endpoints() const { return endpoints_; }
  bool empty() const { return endpoints_.empty(); }

 private:
  std::vector<std::string> endpoints_;
  std::vector<uint64_t> seeds_;  // seeds_[i] belongs to endpoints_[i]
};

}  // namespace furrballs::client

#endif  // FURRBALLS_CLIENTS_CPP_RENDEZVOUS_H_
