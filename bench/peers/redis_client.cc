// bench/peers/redis_client.cc: Redis through hiredis, one blocking connection,
// RESP pipelining for batches larger than one.
#include <hiredis/hiredis.h>

#include <memory>
#include <string>

#include <absl/status/status.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>

#include "bench/peers/peer_client.h"

namespace furrballs::bench::peers {
namespace {

struct ContextDeleter {
  void operator()(redisContext* c) const { redisFree(c); }
};
struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};

class RedisClient : public PeerClient {
 public:
  absl::Status Init(const std::string& address) {
    const size_t colon = address.rfind(':');
    int port = 0;
    if (colon == std::string::npos ||
        !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis address '", address, "' is not host:port"));
    }
    context_.reset(redisConnect(address.substr(0, colon).c_str(), port));
    if (context_ == nullptr || context_->err != 0) {
      return absl::UnavailableError(absl::StrCat(
          "redis at ", address, ": ",
          context_ == nullptr ? "cannot allocate a context" : context_->errstr));
    }
    return absl::OkStatus();
  }

  absl::Status Execute(absl::Span<PeerOp> ops) override {
    // Every command is written to the output buffer first; the first
    // redisGetReply flushes them all, so the batch is on the wire together.
    for (const PeerOp& op : ops) {
      const int appended =
          op.type == OpType::kGet
              ? redisAppendCommand(context_.get(), "GET %b", op.key.data(),
                                   op.key.size())
              : redisAppendCommand(context_.get(), "SET %b %b", op.key.data(),
                                   op.key.size(), op.value.data(),
                                   op.value.size());
      if (appended != REDIS_OK) return Broken();
    }
    for (PeerOp& op : ops) {
      void* raw = nullptr;
      if (redisGetReply(context_.get(), &raw) != REDIS_OK) return Broken();
      std::unique_ptr<redisReply, ReplyDeleter> reply(static_cast<redisReply*>(raw));
      op.done_ns = NowNs();
      if (op.type == OpType::kGet) {
        if (reply->type == REDIS_REPLY_STRING) {
          op.ok = true;
          op.value.assign(reply->str, reply->len);
        } else {
          op.ok = false;
          op.failed = reply->type != REDIS_REPLY_NIL;
        }
      } else {
        op.ok = reply->type == REDIS_REPLY_STATUS;
        op.failed = !op.ok;
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<ServerCounts> Counts() override {
    std::unique_ptr<redisReply, ReplyDeleter> reply(
        static_cast<redisReply*>(redisCommand(context_.get(), "DBSIZE")));
    if (reply == nullptr) return Broken();
    if (reply->type != REDIS_REPLY_INTEGER) {
      return absl::InternalError(absl::StrCat("redis DBSIZE answered type ", reply->type));
    }
    ServerCounts counts;
    counts.resident_keys = static_cast<uint64_t>(reply->integer);
    return counts;
  }

 private:
  absl::Status Broken() {
    return absl::UnavailableError(absl::StrCat("redis: ", context_->errstr));
  }

  std::unique_ptr<redisContext, ContextDeleter> context_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PeerClient>> MakeRedisClient(
    const std::string& address) {
  auto client = std::make_unique<RedisClient>();
  if (absl::Status s = client->Init(address); !s.ok()) return s;
  return std::unique_ptr<PeerClient>(std::move(client));
}

}  // namespace furrballs::bench::peers
