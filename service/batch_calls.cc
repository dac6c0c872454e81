// MultiGet and MultiSet: one RPC, one CacheOp per item, each item answered
// with its own code; the RPC finishes when its last op completes. Both run
// through RunMulti, and differ in how the request is read (a MultiGet by
// protobuf, a MultiSet in place: set_wire.h), how an item decodes
// (RequestCodec) and which result message answers it. A MultiGet's values
// count against --max_response_bytes as they arrive (ResponseBudget).
#include <algorithm>
#include <atomic>
#include <charconv>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/string_view.h>
#include <grpcpp/support/slice.h>

#include "service/cache_service.h"
#include "service/malloc_settings.h"
#include "service/raw_call.h"
#include "service/request_codec.h"
#include "service/response_budget.h"
#include "service/set_wire.h"
#include "service/unary_call.h"

namespace furrballs::service {
namespace {

using grpc::Status;

// A MultiSet's request as gRPC received it (set_wire.h): the slices, held
// until the RPC is answered so that items can be read where they are; the
// items' positions in them; and per item the copies of a key or value that
// spans slices, made when the item is decoded and freed when its op is done.
struct MultiSetInPlace {
  struct Copies {
    std::string key;
    std::string value;
  };

  // Frees item i's copies: its op has run (the engine copied the value into
  // its pages) and nothing reads them again.
  void ReleaseCopies(size_t i) {
    std::string().swap(copies[i].key);
    std::string().swap(copies[i].value);
  }

  std::vector<grpc::Slice> slices;
  SlicedBytes bytes;
  std::vector<SetItemSpans> items;
  std::unique_ptr<Copies[]> copies;
};

// A batch RPC: one CacheOp per item, finished when the last one completes.
// `Result` is the item's answer (GetResponse or SetResult), `results` the
// response's repeated field of them.
template <typename Request, typename Response, typename Result>
struct MultiCall {
  using Rpc = RawUnaryCall<Request, Response>;
  static constexpr bool kReads = std::is_same_v<Result, v1::GetResponse>;

  std::unique_ptr<CacheOp[]> ops;
  std::atomic<size_t> remaining{0};
  Rpc* rpc = nullptr;
  google::protobuf::RepeatedPtrField<Result>* results = nullptr;
  const CacheService* service = nullptr;
  const char* what = "";
  size_t count = 0;
  RequestOp request_op = RequestOp::kMultiGet;
  RequestStats::Clock::time_point start;
  ResponseBudget budget;  // MultiGet's values

  // Called once per op that will not run (rejected at submit or invalid).
  void Settle() {
    if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) Finish();
  }

  // Every item carries its own code, so one bad item never fails the call.
  void Finish() {
    for (size_t i = 0; i < count; ++i) {
      const CacheOp& op = ops[i];
      Result* r = results->Mutable(static_cast<int>(i));
      if (r->code() != 0) continue;  // rejected before it ran
      if (!op.deadline_exceeded && op.error == Error::kOk) {
        RequestCodec::Encode(op, r);
        continue;
      }
      RequestCodec::EncodeItemStatus(
          service->codec().StatusOf(op, absl::StrCat(what, " item ", i)), r);
    }
    FinishCounted(service, rpc, request_op, start, Status::OK);
    delete this;
  }

  static void Done(CacheOp* op, void* context) {
    auto* call = static_cast<MultiCall*>(context);
    if constexpr (kReads) {
      // The value is in the item's result already (the op's value_out);
      // one that does not fit is dropped now, so the answer never holds it.
      if (op->error == Error::kOk && op->get.found) {
        const size_t i = static_cast<size_t>(op - call->ops.get());
        if (grpc::Status s = call->budget.TakeValue(
                op->value_out,
                [call, i] { return absl::StrCat(call->what, " item ", i); });
            !s.ok()) {
          RequestCodec::EncodeItemStatus(
              s, call->results->Mutable(static_cast<int>(i)));
        }
      }
    }
    if constexpr (!kReads) {
      call->rpc->request.ReleaseCopies(
          static_cast<size_t>(op - call->ops.get()));
    }
    call->Settle();
  }
};

// "<what> item <i>", the name an item's error messages start with, built
// on the stack: every item is decoded with it and few use it, and as a
// std::string it was a heap allocation per item from the tenth on (past the
// 15 characters a string keeps inline): 1.05 M of the 3.86 M allocations of
// a 64 B fill (bench/results/2026-11-25-arcrise).
class ItemName {
 public:
  ItemName(absl::string_view what, size_t i) {
    what = what.substr(0, sizeof(buf_) - kSuffixRoom);
    char* p = std::copy(what.begin(), what.end(), buf_);
    p = std::copy_n(" item ", 6, p);
    size_ = static_cast<size_t>(
        std::to_chars(p, buf_ + sizeof(buf_), i).ptr - buf_);
  }
  absl::string_view view() const { return {buf_, size_}; }

 private:
  static constexpr size_t kSuffixRoom = 6 + 20;  // " item " and a size_t
  char buf_[64];
  size_t size_ = 0;
};

// Refuses a batch of more than --max_batch_ops items.
Status CheckItemCount(const CacheService* svc, size_t n, const char* what) {
  const size_t max_items = svc->stream_limits().max_batch_ops;
  if (n <= max_items) return Status::OK;
  return Status(grpc::StatusCode::INVALID_ARGUMENT,
                absl::StrCat(what, ": ", n, " items, over the limit of ",
                             max_items, " (--max_batch_ops)"));
}

// Runs a batch RPC of `n` items, admitted and read (AdmitBody or Accept,
// CheckItemCount): `results` is the response's repeated field of answers,
// `decode(i, what, op, result)` decodes item i (RequestCodec). Each item is
// decoded just before it is submitted, so that what decoding makes for it
// (a MultiSet value's copy) exists only while it runs when ops run inline
// (direct dispatch). Items that do not decode are answered with their
// error; the others are submitted, and those the dispatcher refuses are
// answered with its error.
template <typename Result, typename Request, typename Response,
          typename Decode>
grpc::ServerUnaryReactor* RunMulti(
    CacheService* svc, grpc::CallbackServerContext* ctx,
    RawUnaryCall<Request, Response>* rpc, size_t n,
    google::protobuf::RepeatedPtrField<Result>* results, RequestOp op,
    const char* what, RequestStats::Clock::time_point start, Decode decode) {
  using Call = MultiCall<Request, Response, Result>;
  grpc::ServerUnaryReactor* const reactor = rpc->reactor();
  if (n == 0) return FinishCounted(svc, rpc, op, start, Status::OK);
  // One in-flight slot per item; AdmitBody took the first.
  if (!svc->in_flight().TryAcquire(n - 1)) {
    return FinishCounted(svc, rpc, op, start, svc->AtInFlightLimit(what));
  }
  rpc->add_in_flight_slots(n - 1);

  auto* call = new Call;
  call->ops = std::make_unique<CacheOp[]>(n);
  call->count = n;
  call->remaining.store(n, std::memory_order_relaxed);
  call->rpc = rpc;
  call->results = results;
  call->service = svc;
  call->what = what;
  call->request_op = op;
  call->start = start;
  call->budget.Reset(svc->stream_limits().max_response_bytes);
  // Every answer exists before the first op runs: ops finish on other
  // threads and read theirs while later items are decoded.
  results->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) results->Add();
  const auto deadline = SteadyDeadline(ctx);
  // The call can finish, and be deleted, once its last item is settled or
  // submitted: the loop reads nothing of it after that.
  for (size_t i = 0; i < n; ++i) {
    CacheOp& item_op = call->ops[i];
    Result* result = results->Mutable(static_cast<int>(i));
    Status s = decode(i, ItemName(what, i).view(), item_op, result);
    if (!s.ok()) {
      RequestCodec::EncodeItemStatus(s, result);
      call->Settle();
      continue;
    }
    item_op.deadline = deadline;
    item_op.on_done = &Call::Done;
    item_op.done_context = call;
    if (Error e = svc->dispatcher()->Submit(&item_op); e != Error::kOk) {
      item_op.error = e;
      call->Settle();
    }
  }
  return reactor;
}

}  // namespace

grpc::ServerUnaryReactor* CacheService::MultiGet(
    grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* body,
    grpc::ByteBuffer* reply) {
  constexpr RequestOp kOp = RequestOp::kMultiGet;
  constexpr const char* kWhat = "MultiGet";
  const auto start = RequestStats::Clock::now();
  grpc::ServerUnaryReactor* const reactor = ctx->DefaultReactor();
  auto* rpc = new RawUnaryCall<v1::MultiGetRequest, v1::MultiGetResponse>(
      reactor, reply);
  if (!Accept(this, *ctx, rpc, *body, kOp, Access::kRead, kWhat, start)) {
    return reactor;
  }
  const size_t n = static_cast<size_t>(rpc->request.keys_size());
  if (Status s = CheckItemCount(this, n, kWhat); !s.ok()) {
    return FinishCounted(this, rpc, kOp, start, s);
  }
  return RunMulti(this, ctx, rpc, n, rpc->response.mutable_results(), kOp,
                  kWhat, start,
                  [this, rpc](size_t i, absl::string_view what, CacheOp& op,
                              v1::GetResponse* result) {
                    return codec_.DecodeGet(
                        rpc->request.keys(static_cast<int>(i)), what, op,
                        result->mutable_value());
                  });
}

namespace {

// Serves a MultiSet read whole into `body` and admitted (its in-flight slot
// and bytes held by `rpc`). It is read in place (set_wire.h): its values are
// not copied by a parser, only, one item at a time, those that span gRPC's
// slices.
void ServeMultiSetInPlace(
    CacheService* svc, grpc::CallbackServerContext* ctx,
    RawUnaryCall<MultiSetInPlace, v1::MultiSetResponse>* rpc,
    const grpc::ByteBuffer& body, RequestStats::Clock::time_point start) {
  constexpr RequestOp kOp = RequestOp::kMultiSet;
  constexpr const char* kWhat = "MultiSet";
  const std::string& type = v1::MultiSetRequest::default_instance().GetTypeName();
  MultiSetInPlace& in = rpc->request;
  if (!body.Dump(&in.slices).ok()) {
    FinishCounted(svc, rpc, kOp, start,
                  Unparsable(kWhat, type, "gRPC could not read it"));
    return;
  }
  std::vector<absl::string_view> chunks;
  chunks.reserve(in.slices.size());
  for (const grpc::Slice& slice : in.slices) {
    chunks.emplace_back(reinterpret_cast<const char*>(slice.begin()),
                        slice.size());
  }
  in.bytes = SlicedBytes(std::move(chunks));
  size_t n = 0;
  if (absl::Status s = CountMultiSetItems(in.bytes, &n); !s.ok()) {
    FinishCounted(svc, rpc, kOp, start, Unparsable(kWhat, type, s.message()));
    return;
  }
  if (Status s = CheckItemCount(svc, n, kWhat); !s.ok()) {
    FinishCounted(svc, rpc, kOp, start, s);
    return;
  }
  if (absl::Status s = ParseMultiSetRequest(in.bytes, &in.items); !s.ok()) {
    FinishCounted(svc, rpc, kOp, start, Unparsable(kWhat, type, s.message()));
    return;
  }
  in.copies = std::make_unique<MultiSetInPlace::Copies[]>(n);
  RunMulti(svc, ctx, rpc, n, rpc->response.mutable_results(), kOp, kWhat,
           start,
           [svc, rpc](size_t i, absl::string_view what, CacheOp& op,
                      v1::SetResult*) {
             MultiSetInPlace& in = rpc->request;
             const SetItemSpans& item = in.items[i];
             OpView set;
             set.kind = OpView::Kind::kSet;
             set.key = in.bytes.View(item.key.offset, item.key.length,
                                     &in.copies[i].key);
             set.value = in.bytes.View(item.value.offset, item.value.length,
                                       &in.copies[i].value);
             set.ttl_ms = item.ttl_ms;
             set.mode = item.mode;
             set.expected_version = item.expected_version;
             return svc->codec().Decode(set, what, op, nullptr);
           });
}

// One MultiSet, served as a stream of one message each way (what a unary
// call is on the wire): admitted as a unary call is, then it waits for room
// in the service's request bytes (RequestByteGate) before it asks gRPC for
// the message, so that what gRPC reads for MultiSets stays within
// --max_in_flight_mb. Deleted by gRPC's OnDone.
//
// Lifetime: the reactor lives until OnDone; `rpc_` (the call's state, the
// request's slices, the response) until it is answered through Answer. The
// request's bytes stay counted in the gate until OnDone, with the call's
// own state (RequestByteGate::kCallStateBytes). The
// gate calls Admitted once, from the thread that made room, possibly while
// the handler that queued it is still returning.
class MultiSetReactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
      public RequestByteGate::Waiter,
      public StreamedAnswer {
 public:
  MultiSetReactor(CacheService* svc, grpc::CallbackServerContext* ctx)
      : svc_(svc),
        ctx_(ctx),
        start_(RequestStats::Clock::now()),
        rpc_(new RawUnaryCall<MultiSetInPlace, v1::MultiSetResponse>(
            this, &reply_)) {}

  // Admission, then the read or a place in the gate's queue. Called by the
  // handler once the reactor is built.
  void Start() {
    if (Status s = svc_->Admit(svc_->TokenOf(*ctx_), Access::kWrite, kWhat);
        !s.ok()) {
      FinishCounted(svc_, rpc_, kOp, start_, s);
      return;
    }
    if (!svc_->in_flight().TryAcquire(1)) {
      FinishCounted(svc_, rpc_, kOp, start_, svc_->AtInFlightLimit(kWhat));
      return;
    }
    rpc_->add_in_flight_slots(1);
    size_t reserved = 0;
    if (svc_->in_flight_bytes().Reserve(this, &reserved)) Admitted(reserved);
  }

  void Admitted(size_t reserved) override {
    reserved_ = reserved;
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    // Held until OnDone, not until the answer: the message and the call's
    // own state (RequestByteGate::kCallStateBytes, why there).
    held_ = ok ? request_.Length() + RequestByteGate::kCallStateBytes : 0;
    svc_->in_flight_bytes().Settle(reserved_, held_, ok);
    if (ok) svc_->call_backlog().Read();
    if (!ok) {
      // The call ended (cancelled, past its deadline, or a message over
      // --max_message_bytes, which gRPC itself answers) or the client
      // half-closed without a message: only the last is the client's
      // mistake, and only it is recorded as INVALID_ARGUMENT.
      FinishCounted(svc_, rpc_, kOp, start_,
                    ctx_->IsCancelled()
                        ? Status(grpc::StatusCode::CANCELLED,
                                 "MultiSet: the call ended before its "
                                 "request was read")
                        : Status(grpc::StatusCode::INVALID_ARGUMENT,
                                 "MultiSet: no request message"));
      return;
    }
    ServeMultiSetInPlace(svc_, ctx_, rpc_, request_, start_);
  }

  void Answer(const Status& status) override {
    // The request's slices went with rpc_; the buffer's own references too.
    request_.Clear();
    if (status.ok()) {
      StartWriteAndFinish(&reply_, grpc::WriteOptions(), status);
    } else {
      Finish(status);
    }
  }

  // A call cancelled while it waits in the gate's queue is answered here;
  // one already reading ends through OnReadDone(false).
  void OnCancel() override {
    if (svc_->in_flight_bytes().CancelWait(this)) {
      FinishCounted(svc_, rpc_, kOp, start_,
                    Status(grpc::StatusCode::CANCELLED,
                           "MultiSet: cancelled while waiting to be read"));
    }
  }

  void OnDone() override {
    svc_->in_flight_bytes().Release(held_);
    // A backlog of ended calls has drained: give back what glibc kept of it.
    if (held_ != 0 && svc_->call_backlog().End()) GiveBackFreeHeap();
    delete this;
  }

 private:
  static constexpr RequestOp kOp = RequestOp::kMultiSet;
  static constexpr const char* kWhat = "MultiSet";

  CacheService* const svc_;
  grpc::CallbackServerContext* const ctx_;
  const RequestStats::Clock::time_point start_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer reply_;
  // Deleted when the call is answered (RawUnaryReply::Reply).
  RawUnaryCall<MultiSetInPlace, v1::MultiSetResponse>* const rpc_;
  size_t reserved_ = 0;
  size_t held_ = 0;  // in the gate from the read until OnDone
};

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
CacheService::MultiSetStream(grpc::CallbackServerContext* ctx) {
  auto* stream = new MultiSetReactor(this, ctx);
  stream->Start();
  return stream;
}

}  // namespace furrballs::service
