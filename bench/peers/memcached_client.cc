// bench/peers/memcached_client.cc: memcached through libmemcached (text
// protocol, TCP_NODELAY), one connection. A batch's reads are one multi-get;
// its writes follow one at a time, each acknowledged (peer_client.h says why).
#include <libmemcached/memcached.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <absl/status/status.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>

#include "bench/peers/peer_client.h"

namespace furrballs::bench::peers {
namespace {

struct MemcachedDeleter {
  void operator()(memcached_st* m) const { memcached_free(m); }
};

class MemcachedClient : public PeerClient {
 public:
  ~MemcachedClient() override {
    if (result_ready_) memcached_result_free(&result_);
  }

  absl::Status Init(const std::string& address) {
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("memcached address '", address, "' is not host:port"));
    }
    memc_.reset(memcached_create(nullptr));
    if (memc_ == nullptr) return absl::InternalError("memcached_create failed");
    memcached_behavior_set(memc_.get(), MEMCACHED_BEHAVIOR_TCP_NODELAY, 1);
    memcached_return_t rc = memcached_server_add(
        memc_.get(), address.substr(0, colon).c_str(), static_cast<in_port_t>(port));
    if (rc != MEMCACHED_SUCCESS) return Error("memcached_server_add", rc);
    if (memcached_result_create(memc_.get(), &result_) == nullptr) {
      return absl::InternalError("memcached_result_create failed");
    }
    result_ready_ = true;
    // Connects now, so that an absent server fails here.
    size_t length = 0;
    uint32_t flags = 0;
    char* v = memcached_get(memc_.get(), "furrballs-bench-probe", 21, &length,
                            &flags, &rc);
    std::free(v);
    if (rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND) {
      return Error(absl::StrCat("memcached at ", address), rc);
    }
    return absl::OkStatus();
  }

  absl::Status Execute(absl::Span<PeerOp> ops) override {
    keys_.clear();
    key_lengths_.clear();
    for (PeerOp& op : ops) {
      if (op.type != OpType::kGet) continue;
      op.ok = false;
      keys_.push_back(op.key.data());
      key_lengths_.push_back(op.key.size());
    }
    if (keys_.size() == 1) {
      if (absl::Status s = GetOne(ops); !s.ok()) return s;
    } else if (!keys_.empty()) {
      if (absl::Status s = GetMany(ops); !s.ok()) return s;
    }
    for (PeerOp& op : ops) {
      if (op.type != OpType::kSet) continue;
      const memcached_return_t rc =
          memcached_set(memc_.get(), op.key.data(), op.key.size(),
                        op.value.data(), op.value.size(), 0, 0);
      op.done_ns = NowNs();
      op.ok = rc == MEMCACHED_SUCCESS;
      op.failed = !op.ok;
      if (IsFatal(rc)) return Error("memcached_set", rc);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ServerCounts> Counts() override {
    memcached_return_t rc = MEMCACHED_SUCCESS;
    memcached_stat_st* stats = memcached_stat(memc_.get(), nullptr, &rc);
    if (stats == nullptr || rc != MEMCACHED_SUCCESS) {
      if (stats != nullptr) memcached_stat_free(memc_.get(), stats);
      return Error("memcached stats", rc);
    }
    ServerCounts counts;
    counts.resident_keys = stats[0].curr_items;  // one server
    memcached_stat_free(memc_.get(), stats);
    return counts;
  }

 private:
  static bool IsFatal(memcached_return_t rc) {
    return rc == MEMCACHED_CONNECTION_FAILURE || rc == MEMCACHED_SERVER_MARKED_DEAD ||
           rc == MEMCACHED_NO_SERVERS;
  }

  absl::Status Error(absl::string_view what, memcached_return_t rc) {
    return absl::UnavailableError(
        absl::StrCat(what, ": ", memcached_strerror(memc_.get(), rc)));
  }

  absl::Status GetOne(absl::Span<PeerOp> ops) {
    for (PeerOp& op : ops) {
      if (op.type != OpType::kGet) continue;
      size_t length = 0;
      uint32_t flags = 0;
      memcached_return_t rc = MEMCACHED_SUCCESS;
      char* v = memcached_get(memc_.get(), op.key.data(), op.key.size(), &length,
                              &flags, &rc);
      op.done_ns = NowNs();
      if (v != nullptr) {
        op.ok = true;
        op.value.assign(v, length);
        std::free(v);
      } else {
        op.failed = rc != MEMCACHED_NOTFOUND;
        if (IsFatal(rc)) return Error("memcached_get", rc);
      }
    }
    return absl::OkStatus();
  }

  // One multi-get; a key present twice in the batch answers both reads.
  absl::Status GetMany(absl::Span<PeerOp> ops) {
    memcached_return_t rc =
        memcached_mget(memc_.get(), keys_.data(), key_lengths_.data(), keys_.size());
    if (rc != MEMCACHED_SUCCESS) return Error("memcached_mget", rc);
    while (memcached_fetch_result(memc_.get(), &result_, &rc) != nullptr) {
      const uint64_t now = NowNs();
      const absl::string_view key(memcached_result_key_value(&result_),
                                  memcached_result_key_length(&result_));
      for (PeerOp& op : ops) {
        if (op.type != OpType::kGet || op.ok || op.key != key) continue;
        op.ok = true;
        op.done_ns = now;
        op.value.assign(memcached_result_value(&result_),
                        memcached_result_length(&result_));
      }
    }
    if (rc != MEMCACHED_END && rc != MEMCACHED_SUCCESS && rc != MEMCACHED_NOTFOUND) {
      if (IsFatal(rc)) return Error("memcached_fetch_result", rc);
    }
    // Misses are known only when the server ends the answer.
    const uint64_t end = NowNs();
    for (PeerOp& op : ops) {
      if (op.type == OpType::kGet && !op.ok) op.done_ns = end;
    }
    return absl::OkStatus();
  }

  std::unique_ptr<memcached_st, MemcachedDeleter> memc_;
  memcached_result_st result_;
  bool result_ready_ = false;
  std::vector<const char*> keys_;
  std::vector<size_t> key_lengths_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PeerClient>> MakeMemcachedClient(
    const std::string& address) {
  auto client = std::make_unique<MemcachedClient>();
  if (absl::Status s = client->Init(address); !s.ok()) return s;
  return std::unique_ptr<PeerClient>(std::move(client));
}

}  // namespace furrballs::bench::peers
