// traffic_driver: drives a Furrballs server with every RPC, including calls
// that fail on purpose, so that each metric family the dashboard and the
// alerts read has something to show. Used by metrics_e2e_test.py.
//
//   traffic_driver --target=127.0.0.1:50051 [--keys=512] [--stats_calls=3]
//
// Checks each answer it expects and exits 1 with a message at the first
// surprise. Its last calls are --stats_calls Stats RPCs: the server counts a
// request before answering it, so once a scrape shows that many Stats
// requests, it also shows everything the driver did before them.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/status/status.h>
#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>

#include "clients/cpp/client.h"

ABSL_FLAG(std::string, target, "127.0.0.1:50051", "Server host:port.");
ABSL_FLAG(int, keys, 512,
          "Distinct keys written; enough to land on every node.");
ABSL_FLAG(int, stats_calls, 3, "Stats RPCs made last.");

namespace furrballs::client {
namespace {

// Exits with a message when `ok` is false.
void Expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "traffic_driver: unexpected result: %s\n", what.c_str());
    std::exit(1);
  }
}

void ExpectCode(const absl::Status& s, absl::StatusCode code,
                const std::string& what) {
  Expect(s.code() == code, absl::StrCat(what, ": got ", s.ToString()));
}

std::string Key(int i) { return absl::StrCat("metrics-e2e-key-", i); }

int Run() {
  Client cache(absl::GetFlag(FLAGS_target));
  ExpectCode(cache.WaitForReady(std::chrono::seconds(30)), absl::StatusCode::kOk,
             "WaitForReady");
  const int keys = absl::GetFlag(FLAGS_keys);

  // Unary writes and reads: hits on every node, then misses.
  for (int i = 0; i < keys; ++i) {
    absl::StatusOr<uint64_t> v = cache.Set(Key(i), std::string(100 + i % 200, 'v'));
    ExpectCode(v.status(), absl::StatusCode::kOk, "Set");
  }
  for (int i = 0; i < keys; ++i) {
    absl::StatusOr<std::optional<Entry>> e = cache.Get(Key(i));
    Expect(e.ok() && e->has_value(), absl::StrCat("Get hit ", Key(i)));
  }
  for (int i = 0; i < keys / 4; ++i) {
    absl::StatusOr<std::optional<Entry>> e = cache.Get(absl::StrCat("absent-", i));
    Expect(e.ok() && !e->has_value(), "Get miss");
  }
  // Overwrites of the same keys.
  for (int i = 0; i < keys / 4; ++i) {
    ExpectCode(cache.Set(Key(i), "overwritten").status(), absl::StatusCode::kOk,
               "overwrite");
  }

  // Touch, Delete, and conditional writes that fail on purpose.
  ExpectCode(cache.Touch(Key(1), 60'000), absl::StatusCode::kOk, "Touch");
  ExpectCode(cache.Touch("absent-touch", 60'000), absl::StatusCode::kNotFound,
             "Touch missing");
  for (int i = keys - 16; i < keys; ++i) {
    absl::StatusOr<bool> d = cache.Delete(Key(i));
    Expect(d.ok() && *d, "Delete");
  }
  ExpectCode(cache.Set(Key(2), "x", {.mode = SetMode::kIfAbsent}).status(),
             absl::StatusCode::kAlreadyExists, "Set if absent on a live key");
  ExpectCode(cache.Set(Key(3), "x", {.mode = SetMode::kIfVersion,
                                     .expected_version = ~uint64_t{0}})
                 .status(),
             absl::StatusCode::kAborted, "Set with a wrong version");
  ExpectCode(cache.Set(Key(4), "short-lived", {.ttl_ms = 1}).status(),
             absl::StatusCode::kOk, "Set with TTL");

  // Rejected input.
  ExpectCode(cache.Get("").status(), absl::StatusCode::kInvalidArgument,
             "Get empty key");
  ExpectCode(cache.Set(std::string(4096, 'k'), "v").status(),
             absl::StatusCode::kInvalidArgument, "Set oversized key");
  ExpectCode(cache.Delete("").status(), absl::StatusCode::kInvalidArgument,
             "Delete empty key");

  // Batches.
  std::vector<SetItem> items;
  std::vector<std::string> batch_keys;
  for (int i = 0; i < 32; ++i) {
    items.push_back({absl::StrCat("batch-", i), "batch-value", {}});
    batch_keys.push_back(items.back().key);
  }
  for (int round = 0; round < 8; ++round) {
    auto set = cache.MultiSet(items);
    Expect(set.ok() && set->size() == items.size(), "MultiSet");
    auto get = cache.MultiGet(batch_keys);
    Expect(get.ok() && get->size() == batch_keys.size(), "MultiGet");
  }
  auto mixed = cache.MultiGet(std::vector<std::string>{"ok", ""});
  Expect(mixed.ok() && mixed->size() == 2 && (*mixed)[0].ok(),
         "MultiGet with an empty key answers the other key");
  ExpectCode((*mixed)[1].status(), absl::StatusCode::kInvalidArgument,
             "MultiGet's empty key");

  // The pipelined stream: every operation kind, and one rejected item.
  {
    std::unique_ptr<Pipeline> pipeline = cache.OpenPipeline();
    std::atomic<int> failures{0};
    for (int i = 0; i < 64; ++i) {
      const std::string key = absl::StrCat("pipe-", i);
      Expect(pipeline->Set(key, "piped", {}, [&](absl::StatusOr<uint64_t> v) {
        if (!v.ok()) failures.fetch_add(1);
      }).ok(), "Pipeline Set");
      Expect(pipeline->Get(key, [&](absl::StatusOr<std::optional<Entry>> e) {
        if (!e.ok()) failures.fetch_add(1);
      }).ok(), "Pipeline Get");
      Expect(pipeline->Touch(key, 60'000, [&](absl::Status s) {
        if (!s.ok() && s.code() != absl::StatusCode::kNotFound) failures.fetch_add(1);
      }).ok(), "Pipeline Touch");
      Expect(pipeline->Delete(key, [&](absl::StatusOr<bool> d) {
        if (!d.ok()) failures.fetch_add(1);
      }).ok(), "Pipeline Delete");
    }
    std::atomic<bool> rejected{false};
    Expect(pipeline->Get("", [&](absl::StatusOr<std::optional<Entry>> e) {
      rejected = e.status().code() == absl::StatusCode::kInvalidArgument;
    }).ok(), "Pipeline Get empty key");
    ExpectCode(pipeline->Close(), absl::StatusCode::kOk, "Pipeline Close");
    Expect(failures.load() == 0, "Pipeline operations failed");
    Expect(rejected.load(), "Pipeline empty key not rejected");
  }

  // Asynchronous Gets, many in flight at once, so node workers see batches
  // larger than one.
  {
    constexpr int kInFlight = 256;
    std::atomic<int> left{kInFlight};
    std::atomic<int> failures{0};
    absl::Notification done;
    for (int i = 0; i < kInFlight; ++i) {
      cache.GetAsync(Key(i % keys), [&](absl::StatusOr<std::optional<Entry>> e) {
        if (!e.ok()) failures.fetch_add(1);
        if (left.fetch_sub(1) == 1) done.Notify();
      });
    }
    done.WaitForNotification();
    Expect(failures.load() == 0, "async Gets failed");
  }

  for (int i = 0; i < absl::GetFlag(FLAGS_stats_calls); ++i) {
    auto stats = cache.Stats();
    Expect(stats.ok() && !stats->empty(), "Stats");
  }
  std::printf("traffic_driver: done against %s\n",
              absl::GetFlag(FLAGS_target).c_str());
  return 0;
}

}  // namespace
}  // namespace furrballs::client

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return furrballs::client::Run();
}
