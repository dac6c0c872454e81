// clients/cpp/client.h: the C++ client of one Furrballs server
// (furrballs.v1.Cache over gRPC): synchronous calls, asynchronous calls with a
// completion callback, and the pipelined stream.
//
// Thread safety: thread-safe. One Client (and one Pipeline) may be used by any
// number of threads at once; share one Client per server rather than making
// one per request, since each Client owns a gRPC channel (a connection).
//
// Results. A miss is not an error: Get returns an empty optional. Every
// failure is an absl::Status carrying the server's gRPC code and message
// unchanged (see proto/furrballs/v1/furrballs.proto for the contract):
//   INVALID_ARGUMENT    empty key, key or value over the server's limit
//   ALREADY_EXISTS      Set with SetMode::kIfAbsent on a live key
//   ABORTED             Set with SetMode::kIfVersion saw another version
//   NOT_FOUND           Set with kIfVersion, or Touch, on a missing key
//   RESOURCE_EXHAUSTED  the server cannot make room, or a node queue is full
//   DEADLINE_EXCEEDED   the call's deadline passed
//   UNAVAILABLE         no connection, or the server is starting or stopping
//
// Deadlines. Every call has one: CallOptions::timeout, or else
// ClientOptions::default_timeout, counted from the moment the call starts. A
// timeout of zero (or less) is already expired: the call fails with
// DEADLINE_EXCEEDED. Calls fail fast by default: while the server cannot be
// reached they return UNAVAILABLE at once instead of waiting for the deadline
// (CallOptions::wait_for_ready changes that).
//
// Asynchronous calls (GetAsync, ...) use gRPC's callback API. The callback
// runs exactly once, on a gRPC thread, and should not block: hand long work
// to another thread. Destroying the Client waits until every callback of its
// asynchronous calls has returned, so a callback must not destroy its Client.
//
// Example:
//   furrballs::client::Client cache("127.0.0.1:50051");
//   absl::StatusOr<uint64_t> v = cache.Set("user:7", "{...}", {.ttl_ms = 60000});
//   absl::StatusOr<std::optional<Entry>> e = cache.Get("user:7");
//   if (!e.ok()) { /* RPC failed: e.status() */ }
//   else if (!e->has_value()) { /* miss */ }
//   else { use((*e)->value); }
#ifndef FURRBALLS_CLIENTS_CPP_CLIENT_H_
#define FURRBALLS_CLIENTS_CPP_CLIENT_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <absl/base/thread_annotations.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/string_view.h>
#include <absl/synchronization/mutex.h>
#include <absl/types/span.h>
#include <grpcpp/channel.h>
#include <grpcpp/security/credentials.h>

#include "furrballs/v1/furrballs.grpc.pb.h"

namespace furrballs::client {

// One cached value as a read returns it.
struct Entry {
  std::string value = "";
  // Bumped by the server on every write; pass it to SetMode::kIfVersion.
  uint64_t version = 0;
  // Milliseconds until expiry; 0 when the entry has no TTL.
  uint64_t ttl_remaining_ms = 0;

  bool operator==(const Entry&) const = default;
};

enum class SetMode {
  kAlways,     // write unconditionally
  kIfAbsent,   // only if the key is absent or expired, else ALREADY_EXISTS
  kIfVersion,  // only if the version is expected_version, else ABORTED
               // (NOT_FOUND when the key is absent)
};

struct SetOptions {
  // Time to live in milliseconds; 0 means no expiry.
  uint64_t ttl_ms = 0;
  SetMode mode = SetMode::kAlways;
  // Only read with SetMode::kIfVersion.
  uint64_t expected_version = 0;
};

// One write of a MultiSet.
struct SetItem {
  std::string key = "";
  std::string value = "";
  SetOptions options = {};
};

// Per-call settings.
struct CallOptions {
  // Deadline of this call, from when it starts. Unset: the client's
  // default_timeout. Zero or less: already expired (DEADLINE_EXCEEDED).
  std::optional<std::chrono::milliseconds> timeout = std::nullopt;
  // Wait (until the deadline) for the server to become reachable instead of
  // failing fast with UNAVAILABLE.
  bool wait_for_ready = false;
};

struct ClientOptions {
  // Deadline of calls whose CallOptions set none.
  std::chrono::milliseconds default_timeout{1000};
  // Channel credentials; null means plaintext (the server's default on
  // loopback). TlsCredentialsFromFiles (below) makes them for a TLS or mTLS
  // server.
  std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr;
  // With TLS: the name the server's certificate must carry when it is not
  // the target's host, e.g. for a ClusterClient that connects to resolved
  // pod addresses while the certificate names the Service's DNS names.
  // Empty: the target's host.
  std::string tls_server_name = "";
  // Sent as "authorization: Bearer <token>" on every call when not empty
  // (a server with --auth_token_file needs one; docs/security.md).
  std::string bearer_token = "";
  // Largest message sent or received; must fit the largest MultiGet answer.
  int max_message_bytes = 16 << 20;
  // Upper bound of gRPC's reconnection backoff. gRPC's default (120 s) would
  // keep a restarted server's keys failing for minutes; a cache wants its
  // servers back within about this long of their return.
  std::chrono::milliseconds max_reconnect_backoff{1000};
  // Automatic batching: when > 0, Get, Set, Delete and Touch (sync and
  // async) travel as operations of Batch messages on this many streams, so
  // that the operations concurrent callers issue coalesce into one message
  // (clients/cpp/batcher.h: while one batch is in flight the next fills; no
  // timer). Per-op results, codes and deadlines are as for the unary calls
  // (a Get whose value did not fit its message's answer, the server's
  // --max_response_bytes, is sent again alone within its deadline); calls
  // with wait_for_ready still go unary. 0 sends every call unary. One
  // stream batched best in the measurements (docs/peers_bench.md).
  int batch_streams = 1;
  // With batching on, a synchronous call that finds no other Get, Set,
  // Delete or Touch of this client in flight is sent as a unary RPC, so a
  // lone caller pays nothing for batching: on loopback its p50 was 1.5x the
  // unary p50 through a Batch stream (its answer reaches it through one of
  // gRPC's callback threads; a synchronous unary call waits on its own
  // thread). Asynchronous calls are answered on a callback thread either
  // way, and a lone one measured 1.03x its unary p50 batched, so they are
  // always batched: a burst of them from one thread shares messages.
  // True sends a lone synchronous call in a Batch message too (tests).
  bool batch_lone_calls = false;
};

// One node's statistics, as the server reports them (see the .proto).
using NodeStats = ::furrballs::v1::NodeStats;

// Completion callbacks of the asynchronous calls.
using GetCallback =
    std::function<void(absl::StatusOr<std::optional<Entry>>)>;
using SetCallback = std::function<void(absl::StatusOr<uint64_t>)>;
using DeleteCallback = std::function<void(absl::StatusOr<bool>)>;
using TouchCallback = std::function<void(absl::Status)>;
using MultiGetCallback = std::function<void(
    absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>>)>;
using MultiSetCallback = std::function<void(
    absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>>)>;

struct PipelineOptions {
  // Deadline of the whole stream from when it opens; zero means none (the
  // stream lives until Close()).
  std::chrono::milliseconds stream_timeout{0};
  // Submit() blocks while this many operations await their response, so a
  // fast producer cannot queue without bound.
  size_t max_in_flight = 1024;
};

namespace internal {
class PipelineReactor;
class Batcher;
}  // namespace internal

// Many operations in flight on one bidirectional stream (the Pipeline RPC).
// Each Submit assigns the request a fresh id; responses may arrive in any
// order and are matched back to their callbacks by that id.
//
// Thread safety: thread-safe. Callbacks run on gRPC threads, one at a time
// per response; they must not block, and must not call Submit (which may
// block for flow control) or Close.
//
// Every accepted operation's callback runs exactly once: with the server's
// answer, or with the stream's error if the stream ends first (an op the
// server never answered on an otherwise OK stream gets UNAVAILABLE).
class Pipeline {
 public:
  // The answer to one operation: the response when its code is OK, else the
  // operation's status (the stream itself stays open).
  using ResponseCallback =
      std::function<void(absl::StatusOr<::furrballs::v1::PipelineResponse>)>;

  // Closes the stream (see Close) and waits for it to end; with no
  // stream_timeout and a server that never answers, that is forever, so Cancel
  // first when giving up.
  ~Pipeline();
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // Sends one operation (`request.id` is overwritten). Blocks while
  // max_in_flight operations are outstanding. Returns FAILED_PRECONDITION
  // after Close(), or the stream's error once it has ended; the callback is
  // then not called.
  absl::Status Submit(::furrballs::v1::PipelineRequest request,
                      ResponseCallback done);

  // Typed forms of Submit.
  absl::Status Get(absl::string_view key, GetCallback done);
  absl::Status Set(absl::string_view key, absl::string_view value,
                   const SetOptions& options, SetCallback done);
  absl::Status Delete(absl::string_view key, DeleteCallback done);
  absl::Status Touch(absl::string_view key, uint64_t ttl_ms,
                     TouchCallback done);

  // Half-closes the stream and waits until every accepted operation's
  // callback has returned and the stream has ended. Returns the stream's
  // final status (OK after a clean close). Idempotent.
  absl::Status Close();

  // Cancels the stream: the server stops, and every unanswered operation's
  // callback gets CANCELLED. Close() still waits for those callbacks.
  void Cancel();

  // Operations submitted and not yet answered.
  size_t in_flight() const;

 private:
  friend class Client;
  explicit Pipeline(std::unique_ptr<internal::PipelineReactor> reactor);

  std::unique_ptr<internal::PipelineReactor> reactor_;
};

class Client {
 public:
  // A client of the server at `target` ("host:port", or any gRPC target URI
  // such as "dns:///cache.example:50051"). Connecting is lazy: the first call
  // connects, and construction never fails.
  explicit Client(const std::string& target, ClientOptions options = {});
  // A client over an existing channel (for custom channel set-ups and tests).
  Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options = {});

  // Waits until every asynchronous call's callback has returned.
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  // ---- Synchronous calls.

  // The entry, or nullopt on a miss.
  absl::StatusOr<std::optional<Entry>> Get(absl::string_view key,
                                           const CallOptions& call = {});
  // The version the value now has.
  absl::StatusOr<uint64_t> Set(absl::string_view key, absl::string_view value,
                               const SetOptions& options = {},
                               const CallOptions& call = {});
  // True if a live entry was removed; deleting a missing key is not an error.
  absl::StatusOr<bool> Delete(absl::string_view key,
                              const CallOptions& call = {});
  // Resets the TTL of a live key (0 removes the expiry); NOT_FOUND if absent.
  absl::Status Touch(absl::string_view key, uint64_t ttl_ms,
                     const CallOptions& call = {});
  // One result per key, in request order: the entry, nullopt on a miss, or
  // that key's own error (an empty key, its node's queue full, ...), so one
  // bad key fails only itself. The outer status is the RPC's.
  absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>> MultiGet(
      absl::Span<const std::string> keys, const CallOptions& call = {});
  // One result per item, in request order: each write succeeds or fails on
  // its own. The outer status is the RPC's.
  absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>> MultiSet(
      absl::Span<const SetItem> items, const CallOptions& call = {});
  // Per-node statistics, one entry per NUMA node of the server.
  absl::StatusOr<std::vector<NodeStats>> Stats(const CallOptions& call = {});

  // ---- Asynchronous calls: return at once; `done` runs exactly once.

  void GetAsync(absl::string_view key, GetCallback done,
                const CallOptions& call = {});
  void SetAsync(absl::string_view key, absl::string_view value,
                const SetOptions& options, SetCallback done,
                const CallOptions& call = {});
  void DeleteAsync(absl::string_view key, DeleteCallback done,
                   const CallOptions& call = {});
  void TouchAsync(absl::string_view key, uint64_t ttl_ms, TouchCallback done,
                  const CallOptions& call = {});
  void MultiGetAsync(absl::Span<const std::string> keys, MultiGetCallback done,
                     const CallOptions& call = {});
  void MultiSetAsync(absl::Span<const SetItem> items, MultiSetCallback done,
                     const CallOptions& call = {});

  // ---- Streams and connection.

  // Opens a Pipeline stream. The stream holds its own reference to the
  // channel, so it may outlive this Client.
  std::unique_ptr<Pipeline> OpenPipeline(const PipelineOptions& options = {});

  // Connects if needed and waits up to `timeout` for the channel to be
  // ready. UNAVAILABLE if it is not ready by then.
  absl::Status WaitForReady(std::chrono::milliseconds timeout);

  const std::string& target() const { return target_; }
  const ClientOptions& options() const { return options_; }

 private:
  // Sets the deadline, fail-fast mode and credentials metadata on `ctx`.
  void Prepare(grpc::ClientContext* ctx, const CallOptions& call) const;
  // Bookkeeping that lets the destructor wait for asynchronous callbacks.
  void BeginAsync();
  void EndAsync();

  // Automatic batching (ClientOptions::batch_streams): how a Get, Set,
  // Delete or Touch travels. Route counts the call in flight (unless it is
  // kUnary) until Leave, which a synchronous call runs as it returns and an
  // asynchronous one just before its callback; a synchronous call is
  // kLoneUnary when it was the only one counted.
  enum class Path { kUnary, kLoneUnary, kBatched };
  Path Route(const CallOptions& call, bool synchronous);
  void Leave(Path path);
  // Leave()s on destruction: the synchronous calls' guard.
  class Routed;
  // The two ways a call goes through the batcher. RunBatched waits for the
  // answer until `deadline`; SubmitBatched calls `done` once.
  absl::StatusOr<::furrballs::v1::PipelineResponse> RunBatched(
      ::furrballs::v1::PipelineRequest op,
      std::chrono::system_clock::time_point deadline);
  void SubmitBatched(
      ::furrballs::v1::PipelineRequest op,
      std::chrono::system_clock::time_point deadline,
      std::function<void(absl::StatusOr<::furrballs::v1::PipelineResponse>)>
          done);
  // Get as a unary call: the path of a call not batched, and of a batched
  // Get whose value did not fit its Batch answer (IsOverResponseLimit).
  absl::StatusOr<std::optional<Entry>> UnaryGet(absl::string_view key,
                                                const CallOptions& call);
  // The same, asynchronous; `path` is what Leave() gets before `done` runs.
  void UnaryGetAsync(absl::string_view key, GetCallback done,
                     const CallOptions& call, Path path);

  const std::string target_;
  const ClientOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<::furrballs::v1::Cache::Stub> stub_;

  // Asynchronous calls whose callback has not returned. Counted without
  // mu_, except the step to zero, which is made under mu_ so that the
  // destructor (waiting under mu_ for zero) wakes, and cannot return before
  // that last callback has let go of mu_. Acquire-release decrements chain
  // every callback's effects to the last one, and through mu_ to the
  // destructor.
  absl::Mutex mu_;
  std::atomic<size_t> async_in_flight_{0};
  // Batchable calls in flight (see Route). Relaxed: the count only picks a
  // path, and a stale view sends one call the other way, correct either way.
  std::atomic<size_t> batchable_in_flight_{0};
  // Null unless batch_streams > 0. Declared last: destroyed first, after
  // the destructor waited for every asynchronous callback.
  std::unique_ptr<internal::Batcher> batcher_;
};

// TLS channel credentials from PEM files: `ca_file`, the CAs that may sign
// the server's certificate (empty: the system's roots), and for an mTLS
// server `cert_file` and `key_file`, the client's certificate chain and
// unencrypted key (both or neither). The files are read once: a client that
// outlives a rotation of its certificate makes new credentials. Fails with
// the file and the reason.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
TlsCredentialsFromFiles(const std::string& ca_file,
                        const std::string& cert_file,
                        const std::string& key_file);

// The channel a Client makes for `target` with `options` (credentials, TLS
// server name, message limits, reconnection backoff); exposed for tools that
// build their own stubs.
std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const ClientOptions& options);

}  // namespace furrballs::client

#endif  // FURRBALLS_CLIENTS_CPP_CLIENT_H_
