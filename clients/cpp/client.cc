// clients/cpp/client.cc: see client.h.
#include "clients/cpp/client.h"

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/support/channel_arguments.h>
#include <grpcpp/support/client_callback.h>

#include "clients/cpp/batcher.h"
#include "clients/cpp/ops.h"
#include "clients/cpp/status.h"
#include "engine/common/read_file.h"

namespace furrballs::client {

namespace v1 = ::furrballs::v1;
using internal::AsDeleted;
using internal::AsEntry;
using internal::AsTouched;
using internal::AsVersion;
using internal::DeleteOp;
using internal::FillSet;
using internal::GetOp;
using internal::OpResult;
using internal::SetOp;
using internal::TakeEntry;
using internal::TouchOp;

namespace {


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

}  // namespace furrballs::client
