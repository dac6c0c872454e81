// clients/cpp/client.cc: see client.h.
#include "clients/cpp/client.h"

#include <algorithm>
#include <deque>
#include <utility>

#include <absl/container/flat_hash_map.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/client_callback.h>

#include "clients/cpp/batcher.h"
#include "clients/cpp/status.h"
#include "engine/common/read_file.h"

namespace furrballs::client {

namespace v1 = ::furrballs::v1;

namespace {

v1::SetMode ToProto(SetMode mode) {
  switch (mode) {
    case SetMode::kAlways:
      return v1::SET_ALWAYS;
    case SetMode::kIfAbsent:
      return v1::SET_IF_ABSENT;
    case SetMode::kIfVersion:
      return v1::SET_IF_VERSION;
  }
  return v1::SET_ALWAYS;
}

void FillSet(absl::string_view key, absl::string_view value,
             const SetOptions& options, v1::SetRequest* request) {
  request->set_key(key.data(), key.size());
  request->set_value(value.data(), value.size());
  request->set_ttl_ms(options.ttl_ms);
  request->set_mode(ToProto(options.mode));
  if (options.mode == SetMode::kIfVersion) {
    request->set_expected_version(options.expected_version);
  }
}

// Moves the value out of `response`: large values are not copied twice.
std::optional<Entry> TakeEntry(v1::GetResponse* response) {
  if (!response->found()) return std::nullopt;
  Entry e;
  e.value = std::move(*response->mutable_value());
  e.version = response->version();
  e.ttl_remaining_ms = response->ttl_remaining_ms();
  return e;
}

// The single-key operations as Pipeline/Batch operations, and their answers
// as the typed results the unary calls return.
v1::PipelineRequest GetOp(absl::string_view key) {
  v1::PipelineRequest r;
  r.mutable_get()->set_key(key.data(), key.size());
  return r;
}

v1::PipelineRequest SetOp(absl::string_view key, absl::string_view value,
                          const SetOptions& options) {
  v1::PipelineRequest r;
  FillSet(key, value, options, r.mutable_set());
  return r;
}

v1::PipelineRequest DeleteOp(absl::string_view key) {
  v1::PipelineRequest r;
  r.mutable_delete_()->set_key(key.data(), key.size());
  return r;
}

v1::PipelineRequest TouchOp(absl::string_view key, uint64_t ttl_ms) {
  v1::PipelineRequest r;
  r.mutable_touch()->set_key(key.data(), key.size());
  r.mutable_touch()->set_ttl_ms(ttl_ms);
  return r;
}

using OpResult = absl::StatusOr<v1::PipelineResponse>;

absl::StatusOr<std::optional<Entry>> AsEntry(OpResult r) {
  if (!r.ok()) return r.status();
  return TakeEntry(r->mutable_get());
}

absl::StatusOr<uint64_t> AsVersion(OpResult r) {
  if (!r.ok()) return r.status();
  return r->set().version();
}

absl::StatusOr<bool> AsDeleted(OpResult r) {
  if (!r.ok()) return r.status();
  return r->delete_().deleted();
}

absl::Status AsTouched(OpResult r) { return r.status(); }

// One result per key: its entry (or miss), or its own error code.
std::vector<absl::StatusOr<std::optional<Entry>>> TakeEntries(
    v1::MultiGetResponse* response) {
  std::vector<absl::StatusOr<std::optional<Entry>>> out;
  out.reserve(response->results_size());
  for (v1::GetResponse& r : *response->mutable_results()) {
    if (r.code() != 0) {
      out.emplace_back(StatusFromCode(r.code(), r.message()));
    } else {
      out.emplace_back(TakeEntry(&r));
    }
  }
  return out;
}

std::vector<absl::StatusOr<uint64_t>> SetResults(
    const v1::MultiSetResponse& response) {
  std::vector<absl::StatusOr<uint64_t>> out;
  out.reserve(response.results_size());
  for (const v1::SetResult& r : response.results()) {
    absl::Status st = StatusFromCode(r.code(), r.message());
    if (st.ok()) {
      out.emplace_back(r.version());
    } else {
      out.emplace_back(std::move(st));
    }
  }
  return out;
}

// One asynchronous unary call: gRPC needs the context, request and response
// to stay put until the completion callback, so they live on the heap.
template <typename Request, typename Response>
struct AsyncCall {
  grpc::ClientContext ctx;
  Request request;
  Response response;
};

// The callback's result: `convert(&response)` on success, the status
// otherwise. Frees the call before returning so a callback that starts a new
// call does not hold two.
template <typename Request, typename Response, typename Convert>
auto Finish(AsyncCall<Request, Response>* call, const grpc::Status& status,
            Convert convert)
    -> absl::StatusOr<decltype(convert(&call->response))> {
  std::unique_ptr<AsyncCall<Request, Response>> owned(call);
  if (!status.ok()) return ToAbslStatus(status);
  return convert(&owned->response);
}

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target,
                                           const ClientOptions& options) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(options.max_message_bytes);
  args.SetMaxSendMessageSize(options.max_message_bytes);
  const int max_backoff_ms = static_cast<int>(
      std::max<int64_t>(1, options.max_reconnect_backoff.count()));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, max_backoff_ms);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
              std::min(max_backoff_ms, 1000));
  if (!options.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(options.tls_server_name);
  }
  std::shared_ptr<grpc::ChannelCredentials> creds =
      options.credentials != nullptr ? options.credentials
                                     : grpc::InsecureChannelCredentials();
  return grpc::CreateCustomChannel(target, creds, args);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>>
TlsCredentialsFromFiles(const std::string& ca_file,
                        const std::string& cert_file,
                        const std::string& key_file) {
  if (cert_file.empty() != key_file.empty()) {
    return absl::InvalidArgumentError(
        "a client certificate needs its key and a key its certificate "
        "(give both files or neither)");
  }
  grpc::SslCredentialsOptions ssl;
  for (auto [path, pem] : {std::pair{&ca_file, &ssl.pem_root_certs},
                           std::pair{&cert_file, &ssl.pem_cert_chain},
                           std::pair{&key_file, &ssl.pem_private_key}}) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> text = ReadFileToString(*path);
    if (!text.ok()) return text.status();
    if (text->find("-----BEGIN ") == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat(*path, ": not a PEM file (no -----BEGIN line)"));
    }
    *pem = std::move(*text);
  }
  return grpc::SslCredentials(ssl);
}

// ---------------------------------------------------------------------------
// Client

namespace {

std::unique_ptr<internal::Batcher> MakeBatcher(v1::Cache::Stub* stub,
                                               const ClientOptions& options) {
  if (options.batch_streams <= 0) return nullptr;
  internal::Batcher::Options o;
  o.streams = options.batch_streams;
  o.bearer_token = options.bearer_token;
  return std::make_unique<internal::Batcher>(stub, std::move(o));
}

}  // namespace

Client::Client(const std::string& target, ClientOptions options)
    : target_(target),
      options_(std::move(options)),
      channel_(MakeChannel(target_, options_)),
      stub_(v1::Cache::NewStub(channel_)),
      batcher_(MakeBatcher(stub_.get(), options_)) {}

Client::Client(std::shared_ptr<grpc::Channel> channel, ClientOptions options)
    : target_("(channel)"),
      options_(std::move(options)),
      channel_(std::move(channel)),
      stub_(v1::Cache::NewStub(channel_)),
      batcher_(MakeBatcher(stub_.get(), options_)) {}

Client::~Client() {
  {
    absl::MutexLock lock(&mu_);
    mu_.Await(absl::Condition(
        +[](std::atomic<size_t>* n) {
          return n->load(std::memory_order_acquire) == 0;
        },
        &async_in_flight_));
  }
  batcher_.reset();  // closes its streams, on this (the user's) thread
}

Client::Path Client::Route(const CallOptions& call, bool synchronous) {
  if (batcher_ == nullptr || call.wait_for_ready) return Path::kUnary;
  const size_t others =
      batchable_in_flight_.fetch_add(1, std::memory_order_relaxed);
  return synchronous && others == 0 && !options_.batch_lone_calls
             ? Path::kLoneUnary
             : Path::kBatched;
}

void Client::Leave(Path path) {
  if (path != Path::kUnary) {
    batchable_in_flight_.fetch_sub(1, std::memory_order_relaxed);
  }
}

class Client::Routed {
 public:
  Routed(Client* client, const CallOptions& call)
      : client_(client), path_(client->Route(call, /*synchronous=*/true)) {}
  ~Routed() { client_->Leave(path_); }
  Routed(const Routed&) = delete;
  Routed& operator=(const Routed&) = delete;

  bool batched() const { return path_ == Path::kBatched; }

 private:
  Client* const client_;
  const Path path_;
};

namespace {

// The deadline of a batched call, and whether it has already passed (a
// timeout of zero or less, as for the unary calls).
std::chrono::system_clock::time_point BatchedDeadline(
    const CallOptions& call, const ClientOptions& options) {
  return std::chrono::system_clock::now() +
         call.timeout.value_or(options.default_timeout);
}

absl::Status Expired() {
  return absl::DeadlineExceededError("Deadline Exceeded");
}

// `call` with what is left of `deadline` as its timeout, for a call sent
// again after its batched attempt (rounded down: never past the caller's).
CallOptions Remaining(CallOptions call,
                      std::chrono::system_clock::time_point deadline) {
  call.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::system_clock::now());
  return call;
}

}  // namespace

absl::StatusOr<v1::PipelineResponse> Client::RunBatched(
    v1::PipelineRequest op, std::chrono::system_clock::time_point deadline) {
  if (deadline <= std::chrono::system_clock::now()) return Expired();
  // Shared with the callback, which may run after this call gave up.
  struct Wait {
    absl::Mutex mu;
    bool done ABSL_GUARDED_BY(mu) = false;
    OpResult result ABSL_GUARDED_BY(mu) = absl::UnknownError("unanswered");
  };
  auto wait = std::make_shared<Wait>();
  batcher_->Submit(std::move(op), deadline, [wait](OpResult r) {
    absl::MutexLock lock(&wait->mu);
    wait->result = std::move(r);
    wait->done = true;
  });
  absl::MutexLock lock(&wait->mu);
  if (!wait->mu.AwaitWithDeadline(absl::Condition(&wait->done),
                                  absl::FromChrono(deadline))) {
    return Expired();
  }
  return std::move(wait->result);
}

void Client::SubmitBatched(v1::PipelineRequest op,
                           std::chrono::system_clock::time_point deadline,
                           std::function<void(OpResult)> done) {
  if (deadline <= std::chrono::system_clock::now()) {
    Leave(Path::kBatched);
    done(Expired());
    return;
  }
  BeginAsync();
  batcher_->SubmitWithDeadline(std::move(op), deadline,
                               [this, done = std::move(done)](OpResult r) {
                                 Leave(Path::kBatched);
                                 done(std::move(r));
                                 EndAsync();
                               });
}

void Client::BeginAsync() {
  async_in_flight_.fetch_add(1, std::memory_order_relaxed);
}

void Client::EndAsync() {
  size_t n = async_in_flight_.load(std::memory_order_relaxed);
  while (n > 1) {
    if (async_in_flight_.compare_exchange_weak(n, n - 1,
                                               std::memory_order_acq_rel,
                                               std::memory_order_relaxed)) {
      return;
    }
  }
  absl::MutexLock lock(&mu_);
  async_in_flight_.fetch_sub(1, std::memory_order_acq_rel);
}

void Client::Prepare(grpc::ClientContext* ctx, const CallOptions& call) const {
  const std::chrono::milliseconds timeout =
      call.timeout.value_or(options_.default_timeout);
  // gRPC rounds deadlines up to the next millisecond, so "now" could still
  // leave a loopback call time to finish; an hour ago cannot.
  const auto now = std::chrono::system_clock::now();
  ctx->set_deadline(timeout.count() > 0 ? now + timeout
                                        : now - std::chrono::hours(1));
  ctx->set_wait_for_ready(call.wait_for_ready);
  if (!options_.bearer_token.empty()) {
    ctx->AddMetadata("authorization",
                     absl::StrCat("Bearer ", options_.bearer_token));
  }
}

absl::StatusOr<std::optional<Entry>> Client::Get(absl::string_view key,
                                                 const CallOptions& call) {
  Routed routed(this, call);
  if (routed.batched()) {
    const auto deadline = BatchedDeadline(call, options_);
    OpResult r = RunBatched(GetOp(key), deadline);
    if (!IsOverResponseLimit(r.status())) return AsEntry(std::move(r));
    // Its value did not fit beside the others of its Batch answer; alone it
    // does (clients/README.md, "Automatic batching").
    return UnaryGet(key, Remaining(call, deadline));
  }
  return UnaryGet(key, call);
}

absl::StatusOr<std::optional<Entry>> Client::UnaryGet(
    absl::string_view key, const CallOptions& call) {
  grpc::ClientContext ctx;
  Prepare(&ctx, call);
  v1::GetRequest request;
  request.set_key(key.data(), key.size());
  v1::GetResponse response;
  grpc::Status s = stub_->Get(&ctx, request, &response);
  if (!s.ok()) return ToAbslStatus(s);
  return TakeEntry(&response);
}

absl::StatusOr<uint64_t> Client::Set(absl::string_view key,
                                     absl::string_view value,
                                     const SetOptions& options,
                                     const CallOptions& call) {
  Routed routed(this, call);
  if (routed.batched()) {
    return AsVersion(RunBatched(SetOp(key, value, options),
                                BatchedDeadline(call, options_)));
  }
  grpc::ClientContext ctx;
  Prepare(&ctx, call);
  v1::SetRequest request;
  FillSet(key, value, options, &request);
  v1::SetResponse response;
  grpc::Status s = stub_->Set(&ctx, request, &response);
  if (!s.ok()) return ToAbslStatus(s);
  return response.version();
}

absl::StatusOr<bool> Client::Delete(absl::string_view key,
                                    const CallOptions& call) {
  Routed routed(this, call);
  if (routed.batched()) {
    return AsDeleted(
        RunBatched(DeleteOp(key), BatchedDeadline(call, options_)));
  }
  grpc::ClientContext ctx;
  Prepare(&ctx, call);
  v1::DeleteRequest request;
  request.set_key(key.data(), key.size());
  v1::DeleteResponse response;
  grpc::Status s = stub_->Delete(&ctx, request, &response);
  if (!s.ok()) return ToAbslStatus(s);
  return response.deleted();
}

absl::Status Client::Touch(absl::string_view key, uint64_t ttl_ms,
                           const CallOptions& call) {
  Routed routed(this, call);
  if (routed.batched()) {
    return AsTouched(
        RunBatched(TouchOp(key, ttl_ms), BatchedDeadline(call, options_)));
  }
  grpc::ClientContext ctx;
  Prepare(&ctx, call);
  v1::TouchRequest request;
  request.set_key(key.data(), key.size());
  request.set_ttl_ms(ttl_ms);
  v1::TouchResponse response;
  return ToAbslStatus(stub_->Touch(&ctx, request, &response));
}

absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>>
Client::MultiGet(
    absl::Span<const std::string> keys, const CallOptions& call) {
  grpc::ClientContext ctx;
  Prepare(&ctx, call);
  v1::MultiGetRequest request;
  for (const std::string& k : keys) request.add_keys(k);
  v1::MultiGetResponse response;
  grpc::Status s = stub_->MultiGet(&ctx, request, &response);
  if (!s.ok()) return ToAbslStatus(s);
  if (static_cast<size_t>(response.results_size()) != keys.size()) {
    return absl::InternalError(
        absl::StrCat("MultiGet: server returned ", response.results_size(),
                     " results for ", keys.size(), " keys"));
  }
  return TakeEntries(&response);
}

absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>> Client::MultiSet(
    absl::Span<const SetItem> items, const CallOptions& call) {
  grpc::ClientContext ctx;
  Prepare(&ctx, call);
  v1::MultiSetRequest request;
  for (const SetItem& item : items) {
    FillSet(item.key, item.value, item.options, request.add_items());
  }
  v1::MultiSetResponse response;
  grpc::Status s = stub_->MultiSet(&ctx, request, &response);
  if (!s.ok()) return ToAbslStatus(s);
  if (static_cast<size_t>(response.results_size()) != items.size()) {
    return absl::InternalError(
        absl::StrCat("MultiSet: server returned ", response.results_size(),
                     " results for ", items.size(), " items"));
  }
  return SetResults(response);
}

absl::StatusOr<std::vector<NodeStats>> Client::Stats(const CallOptions& call) {
  grpc::ClientContext ctx;
  Prepare(&ctx, call);
  v1::StatsRequest request;
  v1::StatsResponse response;
  grpc::Status s = stub_->Stats(&ctx, request, &response);
  if (!s.ok()) return ToAbslStatus(s);
  return std::vector<NodeStats>(response.nodes().begin(),
                                response.nodes().end());
}

void Client::GetAsync(absl::string_view key, GetCallback done,
                      const CallOptions& call) {
  const Path path = Route(call, /*synchronous=*/false);
  if (path == Path::kBatched) {
    const auto deadline = BatchedDeadline(call, options_);
    return SubmitBatched(
        GetOp(key), deadline,
        [this, key = std::string(key), call, deadline,
         done = std::move(done)](OpResult r) mutable {
          if (IsOverResponseLimit(r.status())) {
            // As in Get. Started before SubmitBatched's EndAsync, so the
            // destructor waits for it too.
            return UnaryGetAsync(key, std::move(done),
                                 Remaining(call, deadline), Path::kUnary);
          }
          done(AsEntry(std::move(r)));
        });
  }
  UnaryGetAsync(key, std::move(done), call, path);
}

void Client::UnaryGetAsync(absl::string_view key, GetCallback done,
                           const CallOptions& call, Path path) {
  auto* c = new AsyncCall<v1::GetRequest, v1::GetResponse>;
  Prepare(&c->ctx, call);
  c->request.set_key(key.data(), key.size());
  BeginAsync();
  stub_->async()->Get(&c->ctx, &c->request, &c->response,
                      [this, c, path, done = std::move(done)](grpc::Status s) {
                        auto result = Finish(c, s, TakeEntry);
                        Leave(path);
                        done(std::move(result));
                        EndAsync();
                      });
}

void Client::SetAsync(absl::string_view key, absl::string_view value,
                      const SetOptions& options, SetCallback done,
                      const CallOptions& call) {
  const Path path = Route(call, /*synchronous=*/false);
  if (path == Path::kBatched) {
    return SubmitBatched(SetOp(key, value, options),
                         BatchedDeadline(call, options_),
                         [done = std::move(done)](OpResult r) {
                           done(AsVersion(std::move(r)));
                         });
  }
  auto* c = new AsyncCall<v1::SetRequest, v1::SetResponse>;
  Prepare(&c->ctx, call);
  FillSet(key, value, options, &c->request);
  BeginAsync();
  stub_->async()->Set(
      &c->ctx, &c->request, &c->response,
      [this, c, path, done = std::move(done)](grpc::Status s) {
        auto result =
            Finish(c, s, [](v1::SetResponse* r) { return r->version(); });
        Leave(path);
        done(std::move(result));
        EndAsync();
      });
}

void Client::DeleteAsync(absl::string_view key, DeleteCallback done,
                         const CallOptions& call) {
  const Path path = Route(call, /*synchronous=*/false);
  if (path == Path::kBatched) {
    return SubmitBatched(DeleteOp(key),
                         BatchedDeadline(call, options_),
                         [done = std::move(done)](OpResult r) {
                           done(AsDeleted(std::move(r)));
                         });
  }
  auto* c = new AsyncCall<v1::DeleteRequest, v1::DeleteResponse>;
  Prepare(&c->ctx, call);
  c->request.set_key(key.data(), key.size());
  BeginAsync();
  stub_->async()->Delete(
      &c->ctx, &c->request, &c->response,
      [this, c, path, done = std::move(done)](grpc::Status s) {
        auto result =
            Finish(c, s, [](v1::DeleteResponse* r) { return r->deleted(); });
        Leave(path);
        done(std::move(result));
        EndAsync();
      });
}

void Client::TouchAsync(absl::string_view key, uint64_t ttl_ms,
                        TouchCallback done, const CallOptions& call) {
  const Path path = Route(call, /*synchronous=*/false);
  if (path == Path::kBatched) {
    return SubmitBatched(TouchOp(key, ttl_ms),
                         BatchedDeadline(call, options_),
                         [done = std::move(done)](OpResult r) {
                           done(AsTouched(std::move(r)));
                         });
  }
  auto* c = new AsyncCall<v1::TouchRequest, v1::TouchResponse>;
  Prepare(&c->ctx, call);
  c->request.set_key(key.data(), key.size());
  c->request.set_ttl_ms(ttl_ms);
  BeginAsync();
  stub_->async()->Touch(&c->ctx, &c->request, &c->response,
                        [this, c, path, done = std::move(done)](grpc::Status s) {
                          delete c;
                          Leave(path);
                          done(ToAbslStatus(s));
                          EndAsync();
                        });
}

void Client::MultiGetAsync(absl::Span<const std::string> keys,
                           MultiGetCallback done, const CallOptions& call) {
  auto* c = new AsyncCall<v1::MultiGetRequest, v1::MultiGetResponse>;
  Prepare(&c->ctx, call);
  for (const std::string& k : keys) c->request.add_keys(k);
  const size_t expected = keys.size();
  BeginAsync();
  stub_->async()->MultiGet(
      &c->ctx, &c->request, &c->response,
      [this, c, expected, done = std::move(done)](grpc::Status s) {
        absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>>
            result = Finish(c, s, TakeEntries);
        if (result.ok() && result->size() != expected) {
          result = absl::InternalError(
              absl::StrCat("MultiGet: server returned ", result->size(),
                           " results for ", expected, " keys"));
        }
        done(std::move(result));
        EndAsync();
      });
}

void Client::MultiSetAsync(absl::Span<const SetItem> items,
                           MultiSetCallback done, const CallOptions& call) {
  auto* c = new AsyncCall<v1::MultiSetRequest, v1::MultiSetResponse>;
  Prepare(&c->ctx, call);
  for (const SetItem& item : items) {
    FillSet(item.key, item.value, item.options, c->request.add_items());
  }
  const size_t expected = items.size();
  BeginAsync();
  stub_->async()->MultiSet(
      &c->ctx, &c->request, &c->response,
      [this, c, expected, done = std::move(done)](grpc::Status s) {
        absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>> result =
            Finish(c, s, [](v1::MultiSetResponse* r) { return SetResults(*r); });
        if (result.ok() && result->size() != expected) {
          result = absl::InternalError(
              absl::StrCat("MultiSet: server returned ", result->size(),
                           " results for ", expected, " items"));
        }
        done(std::move(result));
        EndAsync();
      });
}

absl::Status Client::WaitForReady(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::system_clock::now() + timeout;
  if (channel_->WaitForConnected(deadline)) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      target_, ": not connected within ", timeout.count(), " ms"));
}

// ---------------------------------------------------------------------------
// Pipeline

namespace internal {

// The stream's reactor. Protocol (all state under mu_; no Start* call is made
// while holding mu_, because gRPC may run a reaction inline from it):
//   - One read is always outstanding from StartCall until the stream ends;
//     OnReadDone moves the response out of incoming_, starts the next read,
//     and hands the response to its callback.
//   - Writes go one at a time (the callback API allows one outstanding
//     write). writing_ says a write is in flight: Submit appends to queue_
//     and, if writing_ was false, sets it and writes queue_.front();
//     OnWriteDone pops the front and writes the next one, or clears writing_.
//     Only the thread that set writing_ (or OnWriteDone) touches the front,
//     so its address is stable while written. Once Close() was called and
//     the queue is empty, WritesDone is sent, once.
//   - OnDone is the reactor's last callback: under mu_ it sets finished_ (no
//     new op is accepted) and takes every unanswered op; it fails them with
//     the stream's status outside the lock, then notifies done_, which Close()
//     waits for. Notify is OnDone's last touch of the reactor.
// Lifetime: the Pipeline owns the reactor alone and destroys it only after
// done_, on the user's thread. A gRPC thread must never destroy it: its
// ClientContext holds a reference to the grpc::Channel, and a Channel released
// last on one of gRPC's callback threads tears down gRPC's shared callback
// completion queue from a thread that is still running on it (gRPC 1.51
// aborts with a double free).
class PipelineReactor final
    : public grpc::ClientBidiReactor<v1::PipelineRequest,
                                     v1::PipelineResponse> {
 public:
  explicit PipelineReactor(const PipelineOptions& options)
      : options_(options) {}

  void Start(v1::Cache::Stub* stub) {
    stub->async()->Pipeline(&ctx_, this);
    StartRead(&incoming_);
    StartCall();
  }

  grpc::ClientContext* context() { return &ctx_; }

  absl::Status Submit(v1::PipelineRequest request,
                      Pipeline::ResponseCallback done) {
    const v1::PipelineRequest* to_write = nullptr;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &PipelineReactor::HasRoom));
      if (finished_) {
        return final_status_.ok()
                   ? absl::FailedPreconditionError("Pipeline stream has ended")
                   : final_status_;
      }
      if (closing_) return absl::FailedPreconditionError("Pipeline is closed");
      const uint64_t id = next_id_++;
      request.set_id(id);
      pending_.emplace(id, std::move(done));
      queue_.push_back(std::move(request));
      if (!writing_ && !broken_) {
        writing_ = true;
        to_write = &queue_.front();
      }
    }
    if (to_write != nullptr) StartWrite(to_write);
    return absl::OkStatus();
  }

  absl::Status Close() {
    bool writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      if (!closing_) {
        closing_ = true;
        writes_done = TakeWritesDoneLocked();
      }
    }
    if (writes_done) StartWritesDone();
    done_.WaitForNotification();
    absl::MutexLock lock(&mu_);
    return final_status_;
  }

  void Cancel() { ctx_.TryCancel(); }

  size_t in_flight() const {
    absl::MutexLock lock(&mu_);
    return pending_.size();
  }

  void OnWriteDone(bool ok) override {
    const v1::PipelineRequest* next = nullptr;
    bool writes_done = false;
    {
      absl::MutexLock lock(&mu_);
      queue_.pop_front();
      if (!ok) {
        // The stream is broken; OnDone will say why and fail the pending
        // ops, including those still queued. Nothing more can be written.
        broken_ = true;
        writing_ = false;
        return;
      }
      if (!queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        writes_done = TakeWritesDoneLocked();
      }
    }
    if (next != nullptr) StartWrite(next);
    if (writes_done) StartWritesDone();
  }

  void OnReadDone(bool ok) override {
    if (!ok) return;  // the stream ended; OnDone follows
    v1::PipelineResponse response = std::move(incoming_);
    incoming_.Clear();
    Pipeline::ResponseCallback done;
    {
      absl::MutexLock lock(&mu_);
      auto it = pending_.find(response.id());
      if (it != pending_.end()) {
        done = std::move(it->second);
        pending_.erase(it);
      }
    }
    StartRead(&incoming_);
    // An id we never sent (or already answered) has nobody to go to; dropping
    // it is all a client can do.
    if (!done) return;
    absl::Status st = StatusFromCode(response.code(), response.message());
    if (st.ok()) {
      done(std::move(response));
    } else {
      done(std::move(st));
    }
  }

  void OnDone(const grpc::Status& status) override {
    const absl::Status st = ToAbslStatus(status);
    absl::flat_hash_map<uint64_t, Pipeline::ResponseCallback> orphans;
    {
      absl::MutexLock lock(&mu_);
      finished_ = true;
      final_status_ = st;
      orphans.swap(pending_);
    }
    const absl::Status orphan_status =
        st.ok() ? absl::UnavailableError(
                      "Pipeline stream ended before this operation's response")
                : st;
    for (auto& [id, done] : orphans) done(orphan_status);
    orphans.clear();
    done_.Notify();
  }

 private:
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ || closing_ || pending_.size() < options_.max_in_flight;
  }

  // True (once) when WritesDone is due: Close() was asked for, every queued
  // write went out, and the stream still takes writes.
  bool TakeWritesDoneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (closing_ && !writing_ && !writes_done_sent_ && !broken_ &&
        !finished_) {
      writes_done_sent_ = true;
      return true;
    }
    return false;
  }

  const PipelineOptions options_;
  grpc::ClientContext ctx_;
  v1::PipelineResponse incoming_;  // only touched by the read chain
  // Notified at the end of OnDone, when no gRPC thread will touch us again.
  absl::Notification done_;

  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, Pipeline::ResponseCallback> pending_
      ABSL_GUARDED_BY(mu_);
  // Requests not yet fully written; front() is the one in flight.
  std::deque<v1::PipelineRequest> queue_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool closing_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_sent_ ABSL_GUARDED_BY(mu_) = false;
  bool broken_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // OnDone has begun
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
};

}  // namespace internal

std::unique_ptr<Pipeline> Client::OpenPipeline(const PipelineOptions& options) {
  auto reactor = std::make_unique<internal::PipelineReactor>(options);
  grpc::ClientContext* ctx = reactor->context();
  if (options.stream_timeout.count() > 0) {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      options.stream_timeout);
  }
  if (!options_.bearer_token.empty()) {
    ctx->AddMetadata("authorization",
                     absl::StrCat("Bearer ", options_.bearer_token));
  }
  reactor->Start(stub_.get());
  return std::unique_ptr<Pipeline>(new Pipeline(std::move(reactor)));
}

Pipeline::Pipeline(std::unique_ptr<internal::PipelineReactor> reactor)
    : reactor_(std::move(reactor)) {}

// Close() returns only after OnDone has finished with the reactor, so the
// reactor (and the channel reference its context holds) is released here, on
// the user's thread.
Pipeline::~Pipeline() { Close().IgnoreError(); }

void Pipeline::Cancel() { reactor_->Cancel(); }

absl::Status Pipeline::Close() { return reactor_->Close(); }

size_t Pipeline::in_flight() const { return reactor_->in_flight(); }

absl::Status Pipeline::Submit(v1::PipelineRequest request,
                              ResponseCallback done) {
  return reactor_->Submit(std::move(request), std::move(done));
}

absl::Status Pipeline::Get(absl::string_view key, GetCallback done) {
  return Submit(GetOp(key), [done = std::move(done)](OpResult r) {
    done(AsEntry(std::move(r)));
  });
}

absl::Status Pipeline::Set(absl::string_view key, absl::string_view value,
                           const SetOptions& options, SetCallback done) {
  return Submit(SetOp(key, value, options),
                [done = std::move(done)](OpResult r) {
                  done(AsVersion(std::move(r)));
                });
}

absl::Status Pipeline::Delete(absl::string_view key, DeleteCallback done) {
  return Submit(DeleteOp(key), [done = std::move(done)](OpResult r) {
    done(AsDeleted(std::move(r)));
  });
}

absl::Status Pipeline::Touch(absl::string_view key, uint64_t ttl_ms,
                             TouchCallback done) {
  return Submit(TouchOp(key, ttl_ms), [done = std::move(done)](OpResult r) {
    done(AsTouched(std::move(r)));
  });
}

}  // namespace furrballs::client
