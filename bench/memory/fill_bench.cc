// fill_bench: the memory fill test's driver (issue 13). Against one running
// server (Furrballs, Redis or memcached, through bench/peers' clients) it
// inserts distinct keys in budget-sized batches until the resident key count
// stops growing (fill_rule.h), sampling the server's VmRSS and resident count
// after every quarter batch, then reads back a sample of the keys inserted
// last (as many as are resident, at least the sample) and checks each value
// against its key. With --cache_aside_ops it
// then drives a cache-aside load (Zipfian reads, a Set after each miss) over a
// key space three times what the budget holds, and reports its hit ratio.
// Progress goes to stderr; one JSON object with every figure goes to --out
// (default stdout). bench/memory/run.py starts the servers and calls this;
// docs/memory_bench.md is the method.
//
//   fill_bench --backend=redis --address=127.0.0.1:6379 --pid=4242
//       --budget_mb=64 --value_bytes=64
//
// Keys are bench/engine's FormatKey ("user" + zero-padded number); every
// value carries its key's number in its first eight bytes (bench/peers'
// StampValue), so a read-back tells another key's value from its own.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <absl/container/flat_hash_set.h>
#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/status/status.h>
#include <absl/status/statusor.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>

#include "bench/engine/ycsb_runner.h"
#include "bench/engine/ycsb_workload.h"
#include "bench/memory/fill_rule.h"
#include "bench/peers/peer_client.h"
#include "bench/peers/peer_loop.h"

ABSL_FLAG(std::string, backend, "furrballs_multi",
          "Client backend: furrballs, furrballs_pipeline, furrballs_multi, redis, "
          "memcached.");
ABSL_FLAG(std::string, address, "127.0.0.1:50051", "The server's host:port.");
ABSL_FLAG(int, pid, 0, "The server's pid, whose VmRSS is sampled (0: RSS not sampled).");
ABSL_FLAG(uint64_t, budget_mb, 64, "The memory budget the server was started with, in MiB.");
ABSL_FLAG(uint64_t, key_bytes, 24, "Key length.");
ABSL_FLAG(uint64_t, value_bytes, 64, "Value length (at least 8: the key number).");
ABSL_FLAG(int, threads, 4, "Inserting threads, one connection each.");
ABSL_FLAG(int, depth, 32, "Operations per request batch (pipelining depth).");
ABSL_FLAG(double, min_growth, 0.005,
          "The fill has settled when a batch adds less than this fraction of the "
          "resident keys.");
ABSL_FLAG(int, max_batches, 10, "Budget-sized batches inserted at most.");
ABSL_FLAG(double, max_seconds, 100, "Seconds of inserting at most.");
ABSL_FLAG(int, steps_per_batch, 4, "RSS and resident-count samples per batch.");
ABSL_FLAG(uint64_t, sample_keys, 1000, "Keys read back after the fill.");
ABSL_FLAG(uint64_t, cache_aside_ops, 0,
          "0: no cache-aside phase. Else the reads of its warm-up and, again, of "
          "its measured part.");
ABSL_FLAG(double, zipf_theta, 0.99, "Zipfian constant of the cache-aside reads.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the read-back sample and the cache-aside keys.");
ABSL_FLAG(std::string, label, "", "Progress lines start with this.");
ABSL_FLAG(std::string, out, "", "Write the JSON result here (default: stdout).");

namespace furrballs::bench::memory {
namespace {

using peers::ClientFactory;
using peers::MakePeerClient;
using peers::OpType;
using peers::PeerCellResult;
using peers::PeerCellSpec;
using peers::PeerClient;
using peers::PeerOp;
using peers::ServerCounts;

// Fill keys are numbered from here, so that they never meet the cache-aside
// phase's key space [0, n).
constexpr uint64_t kFillFirstKey = 1'000'000'000'000;

struct Sample {
  uint64_t inserted = 0;
  uint64_t resident = 0;
  int64_t live_bytes = -1;  // Furrballs only (ServerCounts)
  int64_t rss_bytes = -1;
  double seconds = 0;
};

struct ReadBack {
  uint64_t sampled = 0;
  uint64_t hits = 0;  // the key's own value
  uint64_t misses = 0;
  uint64_t wrong = 0;  // a value of another size or key number
  uint64_t failed = 0;
};

double SecondsSince(uint64_t start_ns) { return (peers::NowNs() - start_ns) * 1e-9; }

std::string CountsJson(const ServerCounts& c, int64_t rss) {
  return absl::StrFormat(
      "{\"resident\":%d,\"live_bytes\":%d,\"memory_limit_bytes\":%d,\"rss_bytes\":%d}",
      c.resident_keys, c.live_bytes, c.memory_limit_bytes, rss);
}

// Reads `sample_keys` distinct keys drawn from the `window` keys inserted
// last (an LRU-like cache should hold those), or the whole window if smaller.
absl::StatusOr<ReadBack> CheckReadBack(PeerClient& client, uint64_t first, uint64_t inserted,
                                       uint64_t window, uint64_t sample_keys,
                                       size_t key_bytes, size_t value_bytes, int depth,
                                       uint64_t seed) {
  window = std::min(window, inserted);
  const uint64_t window_first = first + inserted - window;
  std::vector<uint64_t> numbers;
  if (window <= sample_keys) {
    for (uint64_t k = 0; k < window; ++k) numbers.push_back(window_first + k);
  } else {
    Rng rng(seed);
    absl::flat_hash_set<uint64_t> chosen;
    while (chosen.size() < sample_keys) {
      const uint64_t k = window_first + rng.NextBelow(window);
      if (chosen.insert(k).second) numbers.push_back(k);
    }
  }
  // A Furrballs MultiGet answers at most --max_response_bytes of values
  // (4 MiB by default) and refuses the keys past it, so large values are
  // read back in fewer keys per request.
  constexpr size_t kResponseBytes = size_t{4} << 20;
  depth = static_cast<int>(std::clamp<size_t>(kResponseBytes / value_bytes, 1, depth));
  ReadBack r;
  std::vector<PeerOp> batch;
  for (size_t i = 0; i < numbers.size(); i += depth) {
    batch.resize(std::min<size_t>(depth, numbers.size() - i));
    for (size_t j = 0; j < batch.size(); ++j) {
      batch[j] = PeerOp{};
      batch[j].type = OpType::kGet;
      FormatKey(numbers[i + j], key_bytes, &batch[j].key);
    }
    if (absl::Status s = client.Execute(absl::MakeSpan(batch)); !s.ok()) return s;
    for (size_t j = 0; j < batch.size(); ++j) {
      const PeerOp& op = batch[j];
      ++r.sampled;
      if (op.failed) {
        ++r.failed;
      } else if (!op.ok) {
        ++r.misses;
      } else if (peers::ValueMatches(op.value, numbers[i + j], value_bytes)) {
        ++r.hits;
      } else {
        ++r.wrong;
      }
    }
  }
  return r;
}

int Fail(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "fill_bench: %s: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

int Main() {
  const std::string backend = absl::GetFlag(FLAGS_backend);
  const std::string address = absl::GetFlag(FLAGS_address);
  const int pid = absl::GetFlag(FLAGS_pid);
  const uint64_t budget = absl::GetFlag(FLAGS_budget_mb) << 20;
  const size_t key_bytes = absl::GetFlag(FLAGS_key_bytes);
  const size_t value_bytes = absl::GetFlag(FLAGS_value_bytes);
  const int threads = absl::GetFlag(FLAGS_threads);
  const int depth = absl::GetFlag(FLAGS_depth);
  const int steps = absl::GetFlag(FLAGS_steps_per_batch);
  const std::string label = absl::GetFlag(FLAGS_label).empty()
                                ? absl::StrCat(backend, " ", value_bytes, " B")
                                : absl::GetFlag(FLAGS_label);
  if (budget == 0 || value_bytes < 8 || key_bytes < 24 || threads < 1 || depth < 1 ||
      steps < 1 || absl::GetFlag(FLAGS_max_batches) < 2) {
    std::fprintf(stderr,
                 "fill_bench: need --budget_mb >= 1, --value_bytes >= 8, "
                 "--key_bytes >= 24, --threads, --depth, --steps_per_batch >= 1 and "
                 "--max_batches >= 2\n");
    return 2;
  }
  const ClientFactory factory = [&] { return MakePeerClient(backend, address); };
  absl::StatusOr<std::unique_ptr<PeerClient>> client = factory();
  if (!client.ok()) return Fail(absl::StrCat("connect ", backend, " at ", address), client.status());

  // The fill.
  FillRule rule(FillRuleOptions{.min_growth = absl::GetFlag(FLAGS_min_growth),
                                .max_batches = absl::GetFlag(FLAGS_max_batches),
                                .max_seconds = absl::GetFlag(FLAGS_max_seconds)});
  const uint64_t batch_keys = BatchKeys(budget, key_bytes, value_bytes);
  std::vector<Sample> samples;
  uint64_t inserted = 0;
  uint64_t failed_sets = 0;
  ServerCounts counts;
  FillEnd end = FillEnd::kContinue;
  const uint64_t start = peers::NowNs();
  while (end == FillEnd::kContinue) {
    for (int step = 0; step < steps; ++step) {
      const uint64_t keys =
          batch_keys * (step + 1) / steps - batch_keys * step / steps;
      absl::StatusOr<uint64_t> failed =
          peers::LoadRecords(factory, kFillFirstKey + inserted, keys, key_bytes,
                             value_bytes, threads, depth);
      if (!failed.ok()) return Fail("insert", failed.status());
      failed_sets += *failed;
      inserted += keys;
      absl::StatusOr<ServerCounts> c = (*client)->Counts();
      if (!c.ok()) return Fail("resident count", c.status());
      counts = *c;
      const Sample& s = samples.emplace_back(
          Sample{inserted, counts.resident_keys, counts.live_bytes,
                 pid > 0 ? ReadRssBytes(pid) : -1, SecondsSince(start)});
      std::fprintf(stderr,
                   "[memory] %s: batch %d step %d/%d: %llu inserted, %llu resident, "
                   "RSS %.1f MiB (%.2fx budget), %.1f s\n",
                   label.c_str(), rule.batches() + 1, step + 1, steps,
                   static_cast<unsigned long long>(s.inserted),
                   static_cast<unsigned long long>(s.resident), s.rss_bytes / 1048576.0,
                   static_cast<double>(s.rss_bytes) / static_cast<double>(budget),
                   s.seconds);
      if ((end = rule.AfterStep(s.seconds)) != FillEnd::kContinue) break;
    }
    if (end == FillEnd::kContinue) end = rule.AfterBatch(counts.resident_keys);
  }
  const double fill_seconds = SecondsSince(start);
  const int64_t rss_after_fill = pid > 0 ? ReadRssBytes(pid) : -1;
  std::fprintf(stderr, "[memory] %s: fill ended (%s) after %d batch(es), %.1f s\n",
               label.c_str(), std::string(FillEndName(end)).c_str(), rule.batches(),
               fill_seconds);

  // The window is at least the sample, so that a cache that reports few or
  // no keys still has its answers checked.
  const uint64_t sample_keys = absl::GetFlag(FLAGS_sample_keys);
  absl::StatusOr<ReadBack> read_back = CheckReadBack(
      **client, kFillFirstKey, inserted, std::max(counts.resident_keys, sample_keys),
      sample_keys, key_bytes, value_bytes, depth, absl::GetFlag(FLAGS_seed));
  if (!read_back.ok()) return Fail("read-back", read_back.status());
  std::fprintf(stderr, "[memory] %s: read-back of %llu keys: %llu hits, %llu misses, %llu wrong\n",
               label.c_str(), static_cast<unsigned long long>(read_back->sampled),
               static_cast<unsigned long long>(read_back->hits),
               static_cast<unsigned long long>(read_back->misses),
               static_cast<unsigned long long>(read_back->wrong));

  std::vector<std::string> sample_json;
  for (const Sample& s : samples) {
    sample_json.push_back(absl::StrFormat(
        "{\"inserted\":%d,\"resident\":%d,\"live_bytes\":%d,\"rss_bytes\":%d,"
        "\"seconds\":%.3f}",
        s.inserted, s.resident, s.live_bytes, s.rss_bytes, s.seconds));
  }
  std::string json = absl::StrFormat(
      "{\"backend\":\"%s\",\"budget_bytes\":%d,\"key_bytes\":%d,\"value_bytes\":%d,"
      "\"batch_keys\":%d,\"inserted\":%d,\"failed_sets\":%d,\"batches\":%d,"
      "\"fill_end\":\"%s\",\"fill_seconds\":%.3f,\"samples\":[%s],\"after_fill\":%s,"
      "\"read_back\":{\"sampled\":%d,\"hits\":%d,\"misses\":%d,\"wrong\":%d,"
      "\"failed\":%d}",
      backend, budget, key_bytes, value_bytes, batch_keys, inserted, failed_sets,
      rule.batches(), FillEndName(end), fill_seconds, absl::StrJoin(sample_json, ","),
      CountsJson(counts, rss_after_fill), read_back->sampled, read_back->hits,
      read_back->misses, read_back->wrong, read_back->failed);

  // The cache-aside phase: one thread, so every server sees the same key
  // sequence; the warm-up and the measured part draw from different seeds.
  if (const uint64_t ops = absl::GetFlag(FLAGS_cache_aside_ops); ops > 0) {
    PeerCellSpec spec;
    spec.workload = WorkloadMix{'C', 1.0, false};
    spec.distribution = Distribution::kZipfian;
    spec.records = 3 * batch_keys;
    spec.key_bytes = key_bytes;
    spec.value_bytes = value_bytes;
    spec.threads = 1;
    spec.depth = depth;
    // Zero seconds: the run is exactly min_measured_batches batches long.
    spec.seconds = 0;
    spec.warmup_seconds = 0;
    spec.min_measured_batches = (ops + depth - 1) / depth;
    spec.zipf_theta = absl::GetFlag(FLAGS_zipf_theta);
    spec.seed = absl::GetFlag(FLAGS_seed);
    std::fprintf(stderr, "[memory] %s: cache-aside warm-up, %llu reads over %llu keys\n",
                 label.c_str(), static_cast<unsigned long long>(ops),
                 static_cast<unsigned long long>(spec.records));
    absl::StatusOr<PeerCellResult> warm = peers::RunPeerCell(factory, spec);
    if (!warm.ok()) return Fail("cache-aside warm-up", warm.status());
    spec.seed += 1;
    absl::StatusOr<PeerCellResult> r = peers::RunPeerCell(factory, spec);
    if (!r.ok()) return Fail("cache-aside", r.status());
    absl::StatusOr<ServerCounts> after = (*client)->Counts();
    if (!after.ok()) return Fail("resident count", after.status());
    std::fprintf(stderr, "[memory] %s: cache-aside hit ratio %.4f (%llu reads)\n",
                 label.c_str(), r->HitRatio(), static_cast<unsigned long long>(r->reads));
    absl::StrAppendFormat(
        &json,
        ",\"cache_aside\":{\"records\":%d,\"zipf_theta\":%.3f,\"depth\":%d,"
        "\"warmup_reads\":%d,\"warmup_hit_ratio\":%.5f,\"reads\":%d,\"hits\":%d,"
        "\"hit_ratio\":%.5f,\"bad_values\":%d,\"failed\":%d,\"after\":%s}",
        spec.records, spec.zipf_theta, depth, warm->reads, warm->HitRatio(), r->reads,
        r->read_hits, r->HitRatio(), warm->bad_values + r->bad_values,
        warm->failed + r->failed, CountsJson(*after, pid > 0 ? ReadRssBytes(pid) : -1));
  }
  json += "}\n";

  const std::string out_path = absl::GetFlag(FLAGS_out);
  std::FILE* out = out_path.empty() ? stdout : std::fopen(out_path.c_str(), "w");
  if (out == nullptr) {
    std::fprintf(stderr, "fill_bench: cannot open %s\n", out_path.c_str());
    return 1;
  }
  std::fputs(json.c_str(), out);
  if (out != stdout) std::fclose(out);
  return 0;
}

}  // namespace
}  // namespace furrballs::bench::memory

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return furrballs::bench::memory::Main();
}
