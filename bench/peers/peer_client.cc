// bench/peers/peer_client.cc: the backend registry.
#include "bench/peers/peer_client.h"

#include <chrono>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>

namespace furrballs::bench::peers {

uint64_t NowNs() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

const std::vector<std::string>& PeerBackendNames() {
  static const auto* const kNames = new std::vector<std::string>{
      "furrballs",       "furrballs_batched", "furrballs_pipeline",
      "furrballs_multi", "furrballs_shared",  "redis",
      "memcached"};
  return *kNames;
}

absl::StatusOr<std::unique_ptr<PeerClient>> MakePeerClient(
    const std::string& backend, const std::string& address) {
  if (backend == "furrballs") return MakeFurrballsUnaryClient(address);
  if (backend == "furrballs_batched") return MakeFurrballsBatchedClient(address);
  if (backend == "furrballs_pipeline") return MakeFurrballsPipelineClient(address);
  if (backend == "furrballs_multi") return MakeFurrballsMultiClient(address);
  if (backend == "furrballs_shared") return MakeFurrballsSharedClient(address);
  if (backend == "redis") return MakeRedisClient(address);
  if (backend == "memcached") return MakeMemcachedClient(address);
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown backend '", backend, "' (", absl::StrJoin(PeerBackendNames(), ", "),
      ")"));
}

}  // namespace furrballs::bench::peers
