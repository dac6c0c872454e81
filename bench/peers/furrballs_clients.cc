// bench/peers/furrballs_clients.cc: the three ways the driver talks to a
// Furrballs server, all through the project's C++ client (clients/cpp).
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/blocking_counter.h>
#include <absl/synchronization/mutex.h>

#include "bench/peers/peer_client.h"
#include "clients/cpp/client.h"

namespace furrballs::bench::peers {
namespace {

using ::furrballs::client::CallOptions;
using ::furrballs::client::Client;
using ::furrballs::client::ClientOptions;
using ::furrballs::client::Entry;

// Generous deadlines: an overloaded server should show up as latency, not as
// failed operations.
constexpr std::chrono::milliseconds kTimeout{10000};

// The client's options: with `batching`, its defaults (automatic batching
// on); without, every Get and Set a unary call, so that each of the other
// clients measures its one transport.
ClientOptions Options(bool batching = false) {
  ClientOptions options;
  options.default_timeout = kTimeout;
  if (!batching) options.batch_streams = 0;
  return options;
}

void FinishGet(absl::StatusOr<std::optional<Entry>> result, PeerOp& op) {
  op.done_ns = NowNs();
  if (!result.ok()) {
    op.failed = true;
    return;
  }
  op.ok = result->has_value();
  if (op.ok) op.value = std::move((*result)->value);
}

void FinishSet(const absl::Status& status, PeerOp& op) {
  op.done_ns = NowNs();
  op.ok = status.ok();
  op.failed = !status.ok();
}

absl::Status Connect(Client& client) {
  absl::Status ready = client.WaitForReady(std::chrono::milliseconds(5000));
  if (!ready.ok()) {
    return absl::UnavailableError(
        absl::StrCat("furrballs at ", client.target(), ": ", ready.message()));
  }
  return absl::OkStatus();
}

// Stats summed over the server's nodes.
absl::StatusOr<ServerCounts> CountsOf(Client& client) {
  absl::StatusOr<std::vector<client::NodeStats>> nodes = client.Stats();
  if (!nodes.ok()) return nodes.status();
  ServerCounts counts;
  counts.live_bytes = 0;
  counts.memory_limit_bytes = 0;
  for (const client::NodeStats& node : *nodes) {
    counts.resident_keys += node.live_keys();
    counts.live_bytes += static_cast<int64_t>(node.live_bytes());
    counts.memory_limit_bytes += static_cast<int64_t>(node.memory_limit_bytes());
  }
  return counts;
}

// Get/Set through the client as an application calls it: a batch of one is
// a synchronous call; a larger batch starts every call asynchronously and
// waits for all callbacks. Unary calls (furrballs), or with the client's
// automatic batching (furrballs_batched: a batch of 16 is 16 concurrent
// callers of one client, whose calls share Batch messages). The client may
// be shared by several driver threads (furrballs_shared).
class SingleOpClient : public PeerClient {
 public:
  SingleOpClient(const std::string& address, bool batching)
      : owned_(std::make_shared<Client>(address, Options(batching))),
        client_(*owned_) {}
  explicit SingleOpClient(std::shared_ptr<Client> shared)
      : owned_(std::move(shared)), client_(*owned_) {}

  absl::Status Init() { return Connect(client_); }

  absl::Status Execute(absl::Span<PeerOp> ops) override {
    if (ops.size() == 1) {
      PeerOp& op = ops[0];
      if (op.type == OpType::kGet) {
        FinishGet(client_.Get(op.key), op);
      } else {
        FinishSet(client_.Set(op.key, op.value).status(), op);
      }
      return absl::OkStatus();
    }
    absl::BlockingCounter pending(static_cast<int>(ops.size()));
    for (PeerOp& op : ops) {
      if (op.type == OpType::kGet) {
        client_.GetAsync(op.key, [&op, &pending](auto result) {
          FinishGet(result, op);
          pending.DecrementCount();
        });
      } else {
        client_.SetAsync(op.key, op.value, {}, [&op, &pending](auto result) {
          FinishSet(result.status(), op);
          pending.DecrementCount();
        });
      }
    }
    pending.Wait();
    return absl::OkStatus();
  }

  absl::StatusOr<ServerCounts> Counts() override { return CountsOf(client_); }

 private:
  const std::shared_ptr<Client> owned_;
  Client& client_;
};

// The one batching client of `address` that every driver thread of a cell
// shares (made by the first thread, gone with the last), so that their
// calls coalesce as a multi-threaded application's would.
std::shared_ptr<Client> SharedBatchingClient(const std::string& address) {
  static absl::Mutex mu;
  static auto* clients = new std::map<std::string, std::weak_ptr<Client>>();
  absl::MutexLock lock(&mu);
  std::shared_ptr<Client> client = (*clients)[address].lock();
  if (client == nullptr) {
    client = std::make_shared<Client>(address, Options(/*batching=*/true));
    (*clients)[address] = client;
  }
  return client;
}

// One Pipeline stream per connection, kept open for the client's lifetime.
class PipelineClient : public PeerClient {
 public:
  explicit PipelineClient(const std::string& address) : client_(address, Options()) {}

  absl::Status Init() {
    if (absl::Status s = Connect(client_); !s.ok()) return s;
    pipeline_ = client_.OpenPipeline();
    return absl::OkStatus();
  }

  absl::Status Execute(absl::Span<PeerOp> ops) override {
    absl::BlockingCounter pending(static_cast<int>(ops.size()));
    for (PeerOp& op : ops) {
      absl::Status submitted;
      if (op.type == OpType::kGet) {
        submitted = pipeline_->Get(op.key, [&op, &pending](auto result) {
          FinishGet(result, op);
          pending.DecrementCount();
        });
      } else {
        submitted = pipeline_->Set(op.key, op.value, {},
                                   [&op, &pending](auto result) {
                                     FinishSet(result.status(), op);
                                     pending.DecrementCount();
                                   });
      }
      if (!submitted.ok()) {
        // The stream has ended; the callbacks already accepted still run.
        for (PeerOp* rest = &op; rest != ops.data() + ops.size(); ++rest) {
          rest->failed = true;
          rest->done_ns = NowNs();
          pending.DecrementCount();
        }
        pending.Wait();
        return submitted;
      }
    }
    pending.Wait();
    return absl::OkStatus();
  }

  absl::StatusOr<ServerCounts> Counts() override { return CountsOf(client_); }

 private:
  Client client_;
  std::unique_ptr<client::Pipeline> pipeline_;
};

// MultiGet for the batch's reads and MultiSet for its writes, in flight
// together.
class MultiClient : public PeerClient {
 public:
  explicit MultiClient(const std::string& address) : client_(address, Options()) {}

  absl::Status Init() { return Connect(client_); }

  absl::Status Execute(absl::Span<PeerOp> ops) override {
    gets_.clear();
    sets_.clear();
    get_keys_.clear();
    set_items_.clear();
    for (PeerOp& op : ops) {
      if (op.type == OpType::kGet) {
        gets_.push_back(&op);
        get_keys_.push_back(op.key);
      } else {
        sets_.push_back(&op);
        set_items_.push_back({op.key, op.value, {}});
      }
    }
    absl::BlockingCounter pending((gets_.empty() ? 0 : 1) + (sets_.empty() ? 0 : 1));
    if (!gets_.empty()) {
      client_.MultiGetAsync(get_keys_, [this, &pending](auto result) {
        for (size_t i = 0; i < gets_.size(); ++i) {
          PeerOp& op = *gets_[i];
          if (!result.ok()) {
            FinishGet(result.status(), op);
          } else {
            FinishGet(std::move((*result)[i]), op);
          }
        }
        pending.DecrementCount();
      });
    }
    if (!sets_.empty()) {
      client_.MultiSetAsync(set_items_, [this, &pending](auto result) {
        for (size_t i = 0; i < sets_.size(); ++i) {
          FinishSet(result.ok() ? (*result)[i].status() : result.status(), *sets_[i]);
        }
        pending.DecrementCount();
      });
    }
    pending.Wait();
    return absl::OkStatus();
  }

  absl::StatusOr<ServerCounts> Counts() override { return CountsOf(client_); }

 private:
  Client client_;
  std::vector<PeerOp*> gets_;
  std::vector<PeerOp*> sets_;
  std::vector<std::string> get_keys_;
  std::vector<client::SetItem> set_items_;
};

template <typename T, typename... Args>
absl::StatusOr<std::unique_ptr<PeerClient>> Make(Args... args) {
  auto client = std::make_unique<T>(std::move(args)...);
  if (absl::Status s = client->Init(); !s.ok()) return s;
  return std::unique_ptr<PeerClient>(std::move(client));
}

}  // namespace

absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsUnaryClient(
    const std::string& address) {
  return Make<SingleOpClient>(address, /*batching=*/false);
}

absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsBatchedClient(
    const std::string& address) {
  return Make<SingleOpClient>(address, /*batching=*/true);
}

absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsPipelineClient(
    const std::string& address) {
  return Make<PipelineClient>(address);
}

absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsMultiClient(
    const std::string& address) {
  return Make<MultiClient>(address);
}

absl::StatusOr<std::unique_ptr<PeerClient>> MakeFurrballsSharedClient(
    const std::string& address) {
  return Make<SingleOpClient>(SharedBatchingClient(address));
}

}  // namespace furrballs::bench::peers
