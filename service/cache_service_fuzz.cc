// service/cache_service_fuzz.cc: libFuzzer target for the service's request
// path: arbitrary bytes parsed as the furrballs.v1 request messages (as gRPC
// would parse them) and handed to the real CacheService, whose validation
// and dispatch turn them into engine operations on a real small FurrBall
// (docs/fuzzing.md). No network: unary handlers are called directly, with
// gRPC's DefaultReactorTestPeer standing in for the call; Pipeline streams,
// whose reactor needs a real call, go through an in-process channel.
//
// Thread safety: libFuzzer calls LLVMFuzzerTestOneInput from one thread;
// each request is finished (on a node worker in NodeJob mode) before the
// next one starts.
//
// One FurrBall (2 simulated nodes, small limits so that the fuzzer reaches
// them) is served by two CacheServices: direct dispatch, and NodeJob
// dispatch with a queue of 8 and batches of 4 (so that full queues and
// write compaction happen) and 4 Pipeline ops in flight.
//
// Input: records of [selector byte][u16 length][payload]. The selector's
// low bits choose the RPC (Get, Set, Delete, Touch, MultiGet, MultiSet,
// Stats, Pipeline); its top bit the NodeJob service. The payload is the
// request message; a Pipeline's payload is itself frames of
// [u16 length][PipelineRequest].
//
// Checked: every status code is one the API documents (never INTERNAL,
// UNKNOWN or a hang); what the cache answers agrees with the writes it
// acknowledged: a found value and version are those of the last acknowledged
// write of the key (eviction and expiry may only make it miss), versions of a
// key only grow, a conditional write succeeds only where the acknowledged
// state allows it (SET_IF_VERSION only against the acknowledged version;
// SET_IF_ABSENT never refused for a key not written or deleted since; the
// converse cases may legitimately differ: the key may have expired or been
// evicted). Keys a
// Pipeline touched are left unchecked until written again by a unary call,
// since the stream applies its ops concurrently. A Pipeline answers every
// request once, with its id, and ends OK. Each input ends by deleting the
// keys it wrote, so an input replays alike on its own.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <absl/synchronization/notification.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/server_builder.h>
#include <grpcpp/test/default_reactor_test_peer.h>

#include "engine/furrball/furrball.h"
#include "furrballs/v1/furrballs.grpc.pb.h"
#include "service/cache_service.h"
#include "service/raw_call.h"
#include "service/dispatcher.h"

namespace furrballs::service {
namespace {

using grpc::StatusCode;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "cache_service_fuzz: %s\n", what.c_str());
  std::abort();
}
void Check(bool ok, const std::string& what) {
  if (!ok) Fail(what);
}

// Codes the service may answer (docs/service.md); anything else (INTERNAL,
// UNKNOWN, CANCELLED, ...) is a bug here, where nothing is shutting down
// and no deadline is set.
bool Documented(int code) {
  switch (static_cast<StatusCode>(code)) {
    case StatusCode::OK:
    case StatusCode::INVALID_ARGUMENT:
    case StatusCode::NOT_FOUND:
    case StatusCode::ALREADY_EXISTS:
    case StatusCode::ABORTED:
    case StatusCode::RESOURCE_EXHAUSTED:
      return true;
    default:
      return false;
  }
}

struct Stack {
  std::unique_ptr<Dispatcher> dispatcher;
  std::unique_ptr<CacheService> service;
  std::unique_ptr<grpc::Server> server;  // in-process only, no port
  std::unique_ptr<v1::Cache::Stub> stub;
};

// What the cache acknowledged, per key.
struct Acked {
  std::string value;
  uint64_t version = 0;
};

class Fuzzer {
 public:
  Fuzzer() {
    FurrBallOptions o;
    o.memory_budget_bytes = size_t{4} << 20;
    o.page_size_bytes = size_t{64} << 10;
    o.node_count = 2;
    o.simulate_topology = true;
    o.max_key_bytes = 64;
    o.max_value_bytes = 1024;
    o.pin_workers = false;
    absl::StatusOr<std::unique_ptr<FurrBall>> engine = FurrBall::Open(o);
    if (!engine.ok()) Fail(engine.status().ToString());
    engine_ = *std::move(engine);
    DispatcherOptions direct;
    direct.mode = DispatchMode::kDirect;
    DispatcherOptions nodejob;
    nodejob.mode = DispatchMode::kNodeJob;
    nodejob.queue_capacity = 8;
    nodejob.max_batch = 4;
    Build(direct, &stacks_[0]);
    Build(nodejob, &stacks_[1]);
  }

  void Run(const uint8_t* data, size_t size) {
    size_t pos = 0;
    while (pos < size) {
      const uint8_t selector = data[pos++];
      const size_t len = ReadLength(data, size, &pos);
      const std::string_view payload(reinterpret_cast<const char*>(data) + pos,
                                     len);
      pos += len;
      Stack& stack = stacks_[selector >> 7];
      switch (selector % 8) {
        case 0: Get(stack, payload); break;
        case 1: Set(stack, payload); break;
        case 2: Delete(stack, payload); break;
        case 3: Touch(stack, payload); break;
        case 4: MultiGet(stack, payload); break;
        case 5: MultiSet(stack, payload); break;
        case 6: Stats(stack); break;
        case 7: Pipeline(stack, payload); break;
      }
    }
    Forget();
  }

 private:
  void Build(const DispatcherOptions& options, Stack* stack) {
    stack->dispatcher = std::make_unique<Dispatcher>(engine_.get(), options);
    CacheService::StreamLimits limits;
    limits.max_pipeline_in_flight = 4;
    stack->service = std::make_unique<CacheService>(
        engine_.get(), stack->dispatcher.get(), limits);
    stack->service->SetReady(true);
    grpc::ServerBuilder builder;
    builder.RegisterService(stack->service.get());
    stack->server = builder.BuildAndStart();
    if (stack->server == nullptr) Fail("cannot start an in-process server");
    stack->stub = v1::Cache::NewStub(
        stack->server->InProcessChannel(grpc::ChannelArguments()));
  }

  // A u16 length, cut to what is left.
  static size_t ReadLength(const uint8_t* data, size_t size, size_t* pos) {
    size_t len = 0;
    if (*pos < size) len = data[(*pos)++];
    if (*pos < size) len |= size_t{data[(*pos)++]} << 8;
    return std::min(len, size - *pos);
  }

  // Runs one unary handler as gRPC would, and waits for it to finish.
  template <typename Request, typename Response, typename Handler>
  static grpc::Status Call(CacheService* service, Handler handler,
                           const Request& request, Response* response) {
    grpc::CallbackServerContext ctx;
    absl::Notification done;
    grpc::Status status;
    grpc::testing::DefaultReactorTestPeer peer(&ctx, [&](grpc::Status s) {
      status = std::move(s);
      done.Notify();
    });
    // The service takes and gives bytes (it parses them itself:
    // service/raw_call.h), as gRPC hands them over.
    grpc::ByteBuffer request_bytes;
    grpc::ByteBuffer response_bytes;
    if (!SerializeMessage(request, &request_bytes).ok()) {
      Fail("cannot serialize a request");
    }
    (service->*handler)(&ctx, &request_bytes, &response_bytes);
    done.WaitForNotification();
    // The test reactor marks itself finished just after calling us back (on
    // a node worker in NodeJob mode); ctx must outlive that last store.
    while (!peer.test_status_set()) std::this_thread::yield();
    CheckStatus(status);
    if (status.ok() && !ParseMessage(response_bytes, response)) {
      Fail("an OK answer that does not parse");
    }
    return status;
  }

  // A call's status: one the service documents, with a message if not OK.
  static void CheckStatus(const grpc::Status& status) {
    Check(Documented(status.error_code()),
          "undocumented status " + std::to_string(status.error_code()) +
              ": " + status.error_message());
    Check(status.ok() || !status.error_message().empty(),
          "an error without a message");
  }

  bool Known(const std::string& key) const {
    return pipelined_.count(key) == 0;
  }

  // A found value must be the last acknowledged one.
  void CheckFound(const std::string& key, const v1::GetResponse& r) {
    if (!r.found()) return;
    Check(r.value().size() <= engine_->options().max_value_bytes,
          "a value over the limit");
    if (!Known(key)) return;
    const auto it = acked_.find(key);
    Check(it != acked_.end(), "found a key that was never written or was "
                              "deleted");
    Check(r.value() == it->second.value, "found another value than the last "
                                         "acknowledged write's");
    Check(r.version() == it->second.version,
          "found another version than the last acknowledged write's");
  }

  // The outcome of an acknowledged Set (code OK) or of a refused one.
  void AfterSet(const v1::SetRequest& req, int code, uint64_t version) {
    const std::string& key = req.key();
    const auto it = acked_.find(key);
    const bool known = Known(key);
    if (code != 0) {
      if (code == static_cast<int>(StatusCode::ALREADY_EXISTS) && known) {
        Check(it != acked_.end(),
              "SET_IF_ABSENT refused a key never written or deleted since");
      }
      return;
    }
    Check(version != 0, "an acknowledged write without a version");
    if (known && it != acked_.end()) {
      Check(version > it->second.version, "a key's version went back");
      if (req.mode() == v1::SET_IF_VERSION) {
        Check(req.expected_version() == it->second.version,
              "SET_IF_VERSION succeeded against another version");
      }
    }
    if (known && it == acked_.end() && req.mode() == v1::SET_IF_VERSION) {
      Fail("SET_IF_VERSION succeeded on a key never written or deleted since");
    }
    acked_[key] = Acked{req.value(), version};
    pipelined_.erase(key);
  }

  void Get(Stack& s, std::string_view payload) {
    v1::GetRequest req;
    if (!req.ParseFromArray(payload.data(), payload.size())) return;
    v1::GetResponse resp;
    const grpc::Status st = Call(s.service.get(), &CacheService::Get, req,
                                 &resp);
    if (st.ok()) CheckFound(req.key(), resp);
  }

  void Set(Stack& s, std::string_view payload) {
    v1::SetRequest req;
    if (!req.ParseFromArray(payload.data(), payload.size())) return;
    written_.insert(req.key());
    v1::SetResponse resp;
    const grpc::Status st = Call(s.service.get(), &CacheService::Set, req,
                                 &resp);
    AfterSet(req, st.error_code(), resp.version());
  }

  void Delete(Stack& s, std::string_view payload) {
    v1::DeleteRequest req;
    if (!req.ParseFromArray(payload.data(), payload.size())) return;
    v1::DeleteResponse resp;
    const grpc::Status st = Call(s.service.get(), &CacheService::Delete, req,
                                 &resp);
    if (!st.ok()) return;
    const std::string& key = req.key();
    if (resp.deleted() && Known(key)) {
      Check(acked_.count(key) != 0,
            "deleted a key that was never written or was deleted");
    }
    acked_.erase(key);
    pipelined_.erase(key);
  }

  void Touch(Stack& s, std::string_view payload) {
    v1::TouchRequest req;
    if (!req.ParseFromArray(payload.data(), payload.size())) return;
    v1::TouchResponse resp;
    const grpc::Status st = Call(s.service.get(), &CacheService::Touch, req,
                                 &resp);
    if (st.ok() && Known(req.key())) {
      Check(acked_.count(req.key()) != 0,
            "touched a key that was never written or was deleted");
    }
  }

  void MultiGet(Stack& s, std::string_view payload) {
    v1::MultiGetRequest req;
    if (!req.ParseFromArray(payload.data(), payload.size())) return;
    v1::MultiGetResponse resp;
    const grpc::Status st = Call(s.service.get(), &CacheService::MultiGet,
                                 req, &resp);
    if (!st.ok()) return;
    Check(resp.results_size() == req.keys_size(),
          "MultiGet answered another number of results");
    for (int i = 0; i < req.keys_size(); ++i) {
      CheckFound(req.keys(i), resp.results(i));
    }
  }

  void MultiSet(Stack& s, std::string_view payload) {
    v1::MultiSetRequest req;
    if (!req.ParseFromArray(payload.data(), payload.size())) return;
    for (const v1::SetRequest& item : req.items()) written_.insert(item.key());
    v1::MultiSetResponse resp;
    // MultiSet is a stream of one message on the server (it waits for room
    // before it is read: service/request_byte_gate.h), so it goes through
    // the in-process server rather than a handler called directly.
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(20));
    const grpc::Status st = s.stub->MultiSet(&ctx, req, &resp);
    CheckStatus(st);
    if (!st.ok()) return;
    Check(resp.results_size() == req.items_size(),
          "MultiSet answered another number of results");
    // Items of one key apply in request order (one node's FIFO, or inline).
    for (int i = 0; i < req.items_size(); ++i) {
      const v1::SetResult& r = resp.results(i);
      Check(Documented(r.code()), "undocumented MultiSet item code " +
                                      std::to_string(r.code()));
      Check(r.code() == 0 || !r.message().empty(),
            "a failed MultiSet item without a message");
      AfterSet(req.items(i), r.code(), r.version());
    }
  }

  void Stats(Stack& s) {
    v1::StatsRequest req;
    v1::StatsResponse resp;
    const grpc::Status st = Call(s.service.get(), &CacheService::Stats, req,
                                 &resp);
    Check(st.ok() && resp.nodes_size() == engine_->node_count(),
          "Stats failed or lost a node");
  }

  void Pipeline(Stack& s, std::string_view payload) {
    std::vector<v1::PipelineRequest> frames;
    const auto* bytes = reinterpret_cast<const uint8_t*>(payload.data());
    size_t pos = 0;
    while (pos < payload.size()) {
      const size_t len = ReadLength(bytes, payload.size(), &pos);
      v1::PipelineRequest req;
      if (req.ParseFromArray(payload.data() + pos, static_cast<int>(len))) {
        frames.push_back(std::move(req));
      }
      pos += len;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(20));
    auto stream = s.stub->Pipeline(&ctx);
    // Every frame's id, before any is sent; a frame that cannot be sent
    // ends the stream with an error, which Finish reports.
    std::multiset<uint64_t> ids;
    for (const v1::PipelineRequest& req : frames) ids.insert(req.id());
    // Answers are read while frames are written, as a client must: the
    // server stops reading once max_pipeline_in_flight answers are unwritten,
    // and the in-process transport writes an answer only into a read.
    std::thread reader([&] {
      v1::PipelineResponse resp;
      while (stream->Read(&resp)) {
        const auto it = ids.find(resp.id());
        Check(it != ids.end(), "a Pipeline answer to no request (or twice)");
        ids.erase(it);
        Check(Documented(resp.code()), "undocumented Pipeline code " +
                                           std::to_string(resp.code()) +
                                           ": " + resp.message());
        Check(resp.code() == 0 || !resp.message().empty(),
              "a failed Pipeline op without a message");
      }
    });
    for (const v1::PipelineRequest& req : frames) {
      if (!stream->Write(req)) break;
      for (const std::string* key :
           {&req.get().key(), &req.set().key(), &req.delete_().key(),
            &req.touch().key()}) {
        if (!key->empty()) {
          pipelined_.insert(*key);
          written_.insert(*key);
        }
      }
    }
    stream->WritesDone();
    reader.join();
    const grpc::Status st = stream->Finish();
    Check(st.ok(), "the Pipeline stream ended with " +
                       std::to_string(st.error_code()) + ": " +
                       st.error_message());
    Check(ids.empty(), "a Pipeline request was not answered");
  }

  // Deletes what this input wrote, so that the next input starts alike.
  void Forget() {
    for (const std::string& key : written_) {
      if (engine_->ValidateKey(key) == Error::kOk) {
        engine_->Delete(engine_->Hash(key));
      }
    }
    written_.clear();
    acked_.clear();
    pipelined_.clear();
  }

  std::unique_ptr<FurrBall> engine_;
  Stack stacks_[2];  // direct, NodeJob
  std::map<std::string, Acked> acked_;
  std::set<std::string> pipelined_;  // written by a Pipeline since
  std::set<std::string> written_;    // every key this input may have written
};

Fuzzer* fuzzer = nullptr;

}  // namespace
}  // namespace furrballs::service

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // libFuzzer parses its flags after this returns, so a default can be
  // added here: -detect_leaks=0 unless the command line says otherwise.
  // gRPC frees much of what a call allocated on its own threads after the
  // call, so nearly every input looks like a leak to libFuzzer's per-input
  // check, whose full heap scan then cut the speed from ~5,900 to ~700
  // inputs/s. LeakSanitizer's check at exit still runs.
  static std::vector<char*> args(*argv, *argv + *argc);
  static char no_leak_check[] = "-detect_leaks=0";
  bool given = false;
  for (const char* a : args) {
    given |= std::string_view(a).starts_with("-detect_leaks=");
  }
  if (!given) {
    args.push_back(no_leak_check);
    *argc = static_cast<int>(args.size());
    args.push_back(nullptr);
    *argv = args.data();
  }
  // Lives for the whole process, like a server (and like gRPC's own
  // globals, which outlive main).
  furrballs::service::fuzzer = new furrballs::service::Fuzzer();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  furrballs::service::fuzzer->Run(data, size);
  return 0;
}
