// service_bench: Furrballs over gRPC against the empty-handler server (the
// transport's limit), NodeJob dispatch against direct mode, and dispatcher
// batch sizes 1/16/64, in one run (docs/service_bench.md).
//
// Each server configuration runs as its own process on loopback
// (//service:furrballs_server with flags, //bench/service:empty_server). A
// closed-loop load generator in this process drives it from --threads
// threads, each with its own channel (its own TCP connection), through the
// C++ client library; every thread keeps one RPC in flight, or --depth
// operations on its Pipeline stream. The cells, per server:
//   get       unary Get of a random preloaded key
//   set       unary Set of a random key, --value_bytes bytes
//   pipeline  Pipeline stream, --depth ops in flight per thread, half Gets
//             and half Sets
//   multiget  unary MultiGet of --multiget_keys random keys
// Throughput counts key operations (a MultiGet of 16 keys is 16); latency is
// per RPC (per operation on the Pipeline stream), from the client's call to
// its answer. Server CPU per operation (user + system time of the server
// process over the recorded window, divided by its key operations) is the
// figure least disturbed by other load on a shared machine. All servers run from the start; in each run, each cell runs
// against every server in turn (an order rotated per run), so that the
// configurations are compared seconds apart on a shared machine. The report
// shows medians over runs, and ratios as the median of each run's ratio.
//
// Progress goes to stderr, the markdown report to stdout, raw per-run rows to
// --csv.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/usage.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_join.h>
#include <absl/strings/str_split.h>
#include <absl/synchronization/mutex.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>

#include "bench/service/dispatch_metrics.h"
#include "bench/service/server_process.h"
#include "clients/cpp/client.h"

ABSL_FLAG(bool, quick, false,
          "A short run: changes the defaults of the flags below that say so "
          "(flags given explicitly win).");
ABSL_FLAG(int, runs, 0,
          "Runs; the report shows medians over them. 0: 5 (--quick: 1).");
ABSL_FLAG(int, warmup_ms, 0,
          "Unrecorded load before each cell. 0: 300 (--quick: 100).");
ABSL_FLAG(int, duration_ms, 0,
          "Recorded time per cell. 0: 1000 (--quick: 300).");
ABSL_FLAG(int, threads, 0,
          "Client threads, each with its own channel (TCP connection); client "
          "and servers share this machine's cores. 0: 4 (--quick: 2).");
ABSL_FLAG(int, depth, 16, "Pipeline ops in flight per thread.");
ABSL_FLAG(int, multiget_keys, 16, "Keys per MultiGet.");
ABSL_FLAG(int, keys, 0,
          "Key space, preloaded before the cells. 0: 10000 (--quick: 1000).");
ABSL_FLAG(int, value_bytes, 64, "Value size.");
ABSL_FLAG(std::string, configs, "empty,nodejob64,nodejob16,nodejob1,direct",
          "Server configurations to run. empty: "
          "//bench/service:empty_server; nodejobN: furrballs_server "
          "--dispatch=nodejob --max_batch=N; direct: --dispatch=direct; "
          "not in the default list (docs/topology.md): direct_thread_local "
          "(--dispatch=direct --routing=thread_local), direct_round_robin, "
          "direct_round_robin_migrate (... --migrate_to_readers).");
ABSL_FLAG(std::string, cells, "get,set,pipeline,multiget",
          "Cells to run, a subset of the default list.");
ABSL_FLAG(std::string, server_flags, "--memory_mb=64",
          "Extra flags for every furrballs_server, space separated.");
ABSL_FLAG(std::string, csv, "", "Also write one row per run and cell here.");
ABSL_FLAG(std::string, server_binary, "service/furrballs_server",
          "Path of //service:furrballs_server.");
ABSL_FLAG(std::string, empty_binary, "bench/service/empty_server",
          "Path of //bench/service:empty_server.");

namespace furrballs::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Settings {
  int runs;
  std::chrono::milliseconds warmup;
  std::chrono::milliseconds duration;
  int threads;
  int depth;
  int multiget_keys;
  int keys;
  int value_bytes;
};

enum class CellKind { kGet, kSet, kPipeline, kMultiGet };

struct CellSpec {
  std::string name;
  CellKind kind;
};

struct ServerConfig {
  std::string name;   // as --configs names it
  std::string label;  // as the report shows it
  bool empty = false;
  std::vector<std::string> flags;
};

// One cell of one run.
struct Sample {
  double ops_per_s = 0;
  double p50_us = 0;
  double p99_us = 0;
  // Server CPU time (all its threads) per key operation; 0 if unknown.
  double cpu_us_per_op = 0;
  // Ops per NodeJob batch over the cell (warm-up included); 0 if the server
  // has no dispatcher counters (the empty server) or ran none (direct mode).
  double mean_batch = 0;
  // Hits served on the key's own node over all hits in the cell (warm-up
  // included; furrballs_hits_total by locality); -1 if unknown.
  double local_hit_share = -1;
  uint64_t ops = 0;
  uint64_t errors = 0;
};

// What one load thread saw.
struct ThreadResult {
  std::vector<uint32_t> latency_ns;
  uint64_t ops = 0;
  uint64_t errors = 0;
};

std::string KeyOf(uint64_t i) { return absl::StrFormat("key:%08d", i); }

uint32_t NanosSince(Clock::time_point start, Clock::time_point end) {
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
  return static_cast<uint32_t>(std::min<int64_t>(ns, UINT32_MAX));
}

// A channel with its own connection: gRPC otherwise shares one subchannel
// (one TCP connection) among all channels to the same target.
std::shared_ptr<grpc::Channel> OwnChannel(const std::string& target) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetMaxReceiveMessageSize(16 << 20);
  args.SetMaxSendMessageSize(16 << 20);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(),
                                   args);
}

// The load generator for one server: --threads clients, each over its own
// connection, kept open across cells so that connecting is never timed.
// Thread-compatible: one Run at a time; Run starts and joins its own threads.
class Load {
 public:
  // `metrics_port` is the server's Prometheus port, or 0 for none.
  Load(const Settings& settings, const ServerProcess* server, int metrics_port)
      : settings_(settings),
        server_(server),
        metrics_port_(metrics_port),
        value_(settings.value_bytes, 'v') {
    const std::string address = server->address();
    client::ClientOptions options;
    options.default_timeout = std::chrono::seconds(10);
    // The unary cells measure unary calls, not the client's batching.
    options.batch_streams = 0;
    for (int t = 0; t < settings.threads; ++t) {
      clients_.push_back(
          std::make_unique<client::Client>(OwnChannel(address), options));
    }
  }

  absl::Status Connect() {
    for (auto& c : clients_) {
      if (absl::Status s = c->WaitForReady(std::chrono::seconds(10)); !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

  // Writes every key once, so that the Get cells hit.
  absl::Status Preload() {
    std::vector<client::SetItem> items;
    for (int i = 0; i < settings_.keys; ++i) {
      items.push_back({.key = KeyOf(i), .value = value_});
      if (items.size() == 256 || i + 1 == settings_.keys) {
        auto r = clients_[0]->MultiSet(items);
        if (!r.ok()) return r.status();
        for (const auto& one : *r) {
          if (!one.ok()) return one.status();
        }
        items.clear();
      }
    }
    return absl::OkStatus();
  }

  Sample Run(CellKind kind, uint64_t seed) {
    // Scraped before and after the cell, outside the recorded window, so the
    // scrapes' own CPU time is not counted.
    std::optional<DispatchCounters> before = Scrape();
    std::vector<ThreadResult> results(clients_.size());
    const Clock::time_point start = Clock::now() + std::chrono::milliseconds(20);
    const Clock::time_point recorded = start + settings_.warmup;
    const Clock::time_point end = recorded + settings_.duration;
    std::vector<std::thread> threads;
    for (size_t t = 0; t < clients_.size(); ++t) {
      threads.emplace_back([&, t] {
        std::this_thread::sleep_until(start);
        std::mt19937_64 rng(seed * 1000 + t);
        if (kind == CellKind::kPipeline) {
          RunPipeline(*clients_[t], rng, recorded, end, results[t]);
        } else {
          RunUnary(kind, *clients_[t], rng, recorded, end, results[t]);
        }
      });
    }
    // The server's CPU time over the recorded window.
    std::this_thread::sleep_until(recorded);
    const double cpu_start = server_->CpuSeconds();
    std::this_thread::sleep_until(end);
    const double cpu_end = server_->CpuSeconds();
    for (auto& th : threads) th.join();
    std::optional<DispatchCounters> after = Scrape();

    Sample s;
    std::vector<uint32_t> all;
    for (const ThreadResult& r : results) {
      s.ops += r.ops;
      s.errors += r.errors;
      all.insert(all.end(), r.latency_ns.begin(), r.latency_ns.end());
    }
    s.ops_per_s = static_cast<double>(s.ops) /
                  std::chrono::duration<double>(settings_.duration).count();
    s.p50_us = Percentile(all, 0.50) / 1e3;
    s.p99_us = Percentile(all, 0.99) / 1e3;
    if (cpu_start >= 0 && cpu_end >= 0 && s.ops > 0) {
      s.cpu_us_per_op = (cpu_end - cpu_start) * 1e6 / static_cast<double>(s.ops);
    }
    if (before && after && after->batches > before->batches) {
      s.mean_batch =
          (after->ops - before->ops) / (after->batches - before->batches);
    }
    if (before && after) {
      const double local = after->hits_local - before->hits_local;
      const double remote = after->hits_remote - before->hits_remote;
      if (local + remote > 0) s.local_hit_share = local / (local + remote);
    }
    return s;
  }

 private:
  static double Percentile(std::vector<uint32_t>& v, double q) {
    if (v.empty()) return 0;
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
    std::nth_element(v.begin(), v.begin() + static_cast<ptrdiff_t>(i), v.end());
    return v[i];
  }

  std::optional<DispatchCounters> Scrape() const {
    if (metrics_port_ == 0) return std::nullopt;
    auto c = ScrapeDispatchCounters(metrics_port_);
    if (!c.ok()) return std::nullopt;
    return *c;
  }

  std::string RandomKey(std::mt19937_64& rng) const {
    return KeyOf(rng() % static_cast<uint64_t>(settings_.keys));
  }

  void RunUnary(CellKind kind, client::Client& c, std::mt19937_64& rng,
                Clock::time_point recorded, Clock::time_point end,
                ThreadResult& out) {
    std::vector<std::string> keys(
        kind == CellKind::kMultiGet ? settings_.multiget_keys : 1);
    const uint64_t ops_per_call = keys.size();
    while (true) {
      for (std::string& k : keys) k = RandomKey(rng);
      const Clock::time_point t0 = Clock::now();
      if (t0 >= end) break;
      bool ok = false;
      switch (kind) {
        case CellKind::kGet:
          ok = c.Get(keys[0]).ok();
          break;
        case CellKind::kSet:
          ok = c.Set(keys[0], value_).ok();
          break;
        case CellKind::kMultiGet:
          ok = c.MultiGet(keys).ok();
          break;
        case CellKind::kPipeline:
          break;
      }
      const Clock::time_point t1 = Clock::now();
      if (t0 < recorded) continue;
      out.latency_ns.push_back(NanosSince(t0, t1));
      out.ops += ops_per_call;
      if (!ok) ++out.errors;
    }
  }

  // Keeps `depth` operations in flight on one stream. The window is ours,
  // not the Pipeline's (whose Submit would block inside the timed region).
  void RunPipeline(client::Client& c, std::mt19937_64& rng,
                   Clock::time_point recorded, Clock::time_point end,
                   ThreadResult& out) {
    const size_t depth = static_cast<size_t>(settings_.depth);
    auto pipeline = c.OpenPipeline({.max_in_flight = depth + 1});
    absl::Mutex mu;
    size_t in_flight = 0;  // guarded by mu
    auto room = [&] {
      mu.AssertReaderHeld();
      return in_flight < depth;
    };
    while (true) {
      {
        absl::MutexLock lock(&mu);
        mu.Await(absl::Condition(&room));
        ++in_flight;
      }
      v1::PipelineRequest request;
      if (rng() & 1) {
        request.mutable_get()->set_key(RandomKey(rng));
      } else {
        v1::SetRequest* set = request.mutable_set();
        set->set_key(RandomKey(rng));
        set->set_value(value_);
      }
      const Clock::time_point t0 = Clock::now();
      if (t0 >= end) {
        absl::MutexLock lock(&mu);
        --in_flight;
        break;
      }
      absl::Status submitted = pipeline->Submit(
          std::move(request),
          [&, t0](absl::StatusOr<v1::PipelineResponse> r) {
            const Clock::time_point t1 = Clock::now();
            absl::MutexLock lock(&mu);
            --in_flight;
            if (t0 < recorded) return;
            out.latency_ns.push_back(NanosSince(t0, t1));
            ++out.ops;
            if (!r.ok()) ++out.errors;
          });
      if (!submitted.ok()) {
        absl::MutexLock lock(&mu);
        --in_flight;
        ++out.errors;
        break;
      }
    }
    // Close waits for every callback. A failed stream counts as one more
    // error besides its failed operations.
    if (!pipeline->Close().ok()) ++out.errors;
  }

  const Settings settings_;
  const ServerProcess* const server_;
  const int metrics_port_;
  const std::string value_;
  std::vector<std::unique_ptr<client::Client>> clients_;
};

std::vector<ServerConfig> AllConfigs() {
  auto furrballs = [](std::string name, std::string label,
                      std::vector<std::string> flags) {
    return ServerConfig{std::move(name), std::move(label), false,
                        std::move(flags)};
  };
  return {
      {"empty", "empty handler", true, {}},
      furrballs("nodejob64", "Furrballs NodeJob, batch 64",
                {"--dispatch=nodejob", "--max_batch=64"}),
      furrballs("nodejob16", "Furrballs NodeJob, batch 16",
                {"--dispatch=nodejob", "--max_batch=16"}),
      furrballs("nodejob1", "Furrballs NodeJob, batch 1",
                {"--dispatch=nodejob", "--max_batch=1"}),
      furrballs("direct", "Furrballs direct", {"--dispatch=direct"}),
      // The topology comparison (docs/topology.md): a key written through
      // the server lands on the node of the gRPC thread that wrote it.
      furrballs("direct_thread_local", "Furrballs direct, thread-local",
                {"--dispatch=direct", "--routing=thread_local"}),
      // Keys spread over the nodes, read from the gRPC thread's node: remote
      // reads, or migration to the reader.
      furrballs("direct_round_robin", "Furrballs direct, round-robin",
                {"--dispatch=direct", "--routing=round_robin"}),
      furrballs("direct_round_robin_migrate",
                "Furrballs direct, round-robin + migration",
                {"--dispatch=direct", "--routing=round_robin",
                 "--migrate_to_readers"}),
  };
}

std::vector<CellSpec> AllCells() {
  return {{"get", CellKind::kGet},
          {"set", CellKind::kSet},
          {"pipeline", CellKind::kPipeline},
          {"multiget", CellKind::kMultiGet}};
}

template <typename T>
std::optional<std::vector<T>> Select(const std::vector<T>& all,
                                     const std::string& list,
                                     std::string* unknown) {
  std::vector<T> out;
  for (absl::string_view name : absl::StrSplit(list, ',', absl::SkipEmpty())) {
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const T& x) { return x.name == name; });
    if (it == all.end()) {
      *unknown = std::string(name);
      return std::nullopt;
    }
    out.push_back(*it);
  }
  return out;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// results[config][cell] holds one Sample per run, in run order.
using Results = std::map<std::string, std::map<std::string, std::vector<Sample>>>;

// The median over runs of a/b for one metric, or nullopt when a
// configuration did not run.
std::optional<double> RatioMedian(const Results& results, const std::string& a,
                                  const std::string& b, const std::string& cell,
                                  double Sample::*metric) {
  auto ia = results.find(a);
  auto ib = results.find(b);
  if (ia == results.end() || ib == results.end()) return std::nullopt;
  const auto& sa = ia->second.at(cell);
  const auto& sb = ib->second.at(cell);
  std::vector<double> ratios;
  for (size_t r = 0; r < sa.size() && r < sb.size(); ++r) {
    if (sb[r].*metric > 0) ratios.push_back(sa[r].*metric / sb[r].*metric);
  }
  if (ratios.empty()) return std::nullopt;
  return Median(ratios);
}

std::string Cell(std::optional<double> v) {
  return v ? absl::StrFormat("%.2f", *v) : "–";
}

void PrintReport(const Settings& s, const std::vector<ServerConfig>& configs,
                 const std::vector<CellSpec>& cells, const Results& results,
                 const std::string& server_flags) {
  std::printf("## Service benchmark\n\n");
  std::printf(
      "Medians of %d run(s); %d client threads (one channel each), %d ms "
      "recorded after %d ms warm-up per cell; %d keys of %d-byte values; "
      "Pipeline depth %d (half Get, half Set); MultiGet of %d keys; "
      "furrballs_server %s; %u CPUs shared by client and server.\n\n",
      s.runs, s.threads, static_cast<int>(s.duration.count()),
      static_cast<int>(s.warmup.count()), s.keys, s.value_bytes, s.depth,
      s.multiget_keys, server_flags.c_str(),
      std::thread::hardware_concurrency());
  std::printf(
      "| cell | server | key ops/s | p50 µs | p99 µs | server CPU µs/op | "
      "ops/batch | local hits | errors |\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const CellSpec& cell : cells) {
    for (const ServerConfig& config : configs) {
      const std::vector<Sample>& v = results.at(config.name).at(cell.name);
      std::vector<double> ops, p50, p99, cpu, batch, local;
      uint64_t errors = 0;
      for (const Sample& x : v) {
        ops.push_back(x.ops_per_s);
        p50.push_back(x.p50_us);
        p99.push_back(x.p99_us);
        cpu.push_back(x.cpu_us_per_op);
        batch.push_back(x.mean_batch);
        local.push_back(x.local_hit_share);
        errors += x.errors;
      }
      const double mean_batch = Median(batch);
      const double local_share = Median(local);
      std::printf("| %s | %s | %.0f | %.0f | %.0f | %.1f | %s | %s | %llu |\n",
                  cell.name.c_str(), config.label.c_str(), Median(ops),
                  Median(p50), Median(p99), Median(cpu),
                  mean_batch > 0 ? absl::StrFormat("%.1f", mean_batch).c_str()
                                 : "–",
                  local_share >= 0
                      ? absl::StrFormat("%.0f%%", 100 * local_share).c_str()
                      : "–",
                  static_cast<unsigned long long>(errors));
    }
  }
  struct RatioSpec {
    const char* title;
    const char* a;
    const char* b;
  };
  const RatioSpec ratios[] = {
      {"Furrballs/empty", "nodejob64", "empty"},
      {"direct/empty", "direct", "empty"},
      {"NodeJob/direct", "nodejob64", "direct"},
      {"batch 16/1", "nodejob16", "nodejob1"},
      {"batch 64/1", "nodejob64", "nodejob1"},
  };
  const std::pair<const char*, double Sample::*> metrics[] = {
      {"throughput", &Sample::ops_per_s},
      {"p50 latency", &Sample::p50_us},
      {"p99 latency", &Sample::p99_us},
      {"server CPU per op", &Sample::cpu_us_per_op},
  };
  std::printf(
      "\nRatios (median over runs of each run's ratio; Furrballs and NodeJob "
      "are NodeJob with batch 64, the server's default):\n");
  for (const auto& [metric_name, metric] : metrics) {
    std::printf("\n| %s |", metric_name);
    for (const RatioSpec& r : ratios) std::printf(" %s |", r.title);
    std::printf("\n|---|");
    for (size_t i = 0; i < std::size(ratios); ++i) std::printf("---:|");
    std::printf("\n");
    for (const CellSpec& cell : cells) {
      std::printf("| %s |", cell.name.c_str());
      for (const RatioSpec& r : ratios) {
        std::printf(" %s |",
                    Cell(RatioMedian(results, r.a, r.b, cell.name, metric))
                        .c_str());
      }
      std::printf("\n");
    }
  }
  std::fflush(stdout);
}

std::vector<std::string> SplitFlags(const std::string& flags) {
  std::vector<std::string> out;
  for (absl::string_view f : absl::StrSplit(flags, ' ', absl::SkipEmpty())) {
    out.emplace_back(f);
  }
  return out;
}

// The flag's value, or when it is 0 its default for the mode.
int OrDefault(const absl::Flag<int>& flag, int full, int quick) {
  const int v = absl::GetFlag(flag);
  if (v != 0) return v;
  return absl::GetFlag(FLAGS_quick) ? quick : full;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Furrballs over gRPC against an empty-handler server, NodeJob against "
      "direct dispatch, and batch sizes 1/16/64 (docs/service_bench.md).\n"
      "  bazel run -c opt //bench/service:service_bench -- [--quick] "
      "[--csv=FILE]");
  absl::ParseCommandLine(argc, argv);
  Settings s;
  s.runs = OrDefault(FLAGS_runs, 5, 1);
  s.warmup = std::chrono::milliseconds(OrDefault(FLAGS_warmup_ms, 300, 100));
  s.duration =
      std::chrono::milliseconds(OrDefault(FLAGS_duration_ms, 1000, 300));
  s.threads = OrDefault(FLAGS_threads, 4, 2);
  s.depth = absl::GetFlag(FLAGS_depth);
  s.multiget_keys = absl::GetFlag(FLAGS_multiget_keys);
  s.keys = OrDefault(FLAGS_keys, 10000, 1000);
  s.value_bytes = absl::GetFlag(FLAGS_value_bytes);
  if (s.runs < 1 || s.threads < 1 || s.depth < 1 || s.multiget_keys < 1 ||
      s.keys < 1 || s.value_bytes < 0 || s.duration.count() < 1 ||
      s.warmup.count() < 1) {
    std::fprintf(stderr, "service_bench: counts and durations must be positive\n");
    return 2;
  }
  std::string unknown;
  auto configs = Select(AllConfigs(), absl::GetFlag(FLAGS_configs), &unknown);
  auto cells = Select(AllCells(), absl::GetFlag(FLAGS_cells), &unknown);
  if (!configs || !cells) {
    std::fprintf(stderr, "service_bench: unknown config or cell \"%s\"\n",
                 unknown.c_str());
    return 2;
  }
  const std::string server_flags = absl::GetFlag(FLAGS_server_flags);

  FILE* csv = nullptr;
  if (const std::string path = absl::GetFlag(FLAGS_csv); !path.empty()) {
    csv = std::fopen(path.c_str(), "w");
    if (csv == nullptr) {
      std::fprintf(stderr, "service_bench: cannot write %s\n", path.c_str());
      return 2;
    }
    std::fprintf(csv,
                 "run,server,cell,ops_per_s,p50_us,p99_us,server_cpu_us_per_op,"
                 "mean_batch,ops,errors,local_hit_share\n");
  }

  // Every server runs for the whole benchmark (an idle one costs next to no
  // CPU), so that the servers take turns cell by cell: configurations are
  // compared seconds apart, not minutes, on a machine whose other load
  // changes.
  std::vector<std::unique_ptr<ServerProcess>> servers;
  std::vector<std::unique_ptr<Load>> loads;
  for (const ServerConfig& config : *configs) {
    // A free metrics port is only free until someone takes it: a start that
    // fails is retried with another.
    absl::StatusOr<std::unique_ptr<ServerProcess>> server;
    int metrics_port = 0;
    for (int attempt = 0; attempt < 3; ++attempt) {
      std::vector<std::string> argv;
      std::string marker;
      if (config.empty) {
        argv = {absl::GetFlag(FLAGS_empty_binary), "--address=127.0.0.1:0"};
        marker = "empty_server: listening on ";
      } else {
        auto port = PickFreeLoopbackPort();
        if (!port.ok()) {
          server = port.status();
          break;
        }
        metrics_port = *port;
        argv = {absl::GetFlag(FLAGS_server_binary),
                "--listen_address=127.0.0.1:0",
                absl::StrCat("--metrics_address=127.0.0.1:", metrics_port),
                "--shutdown_deadline_ms=2000"};
        for (const std::string& f : config.flags) argv.push_back(f);
        for (const std::string& f : SplitFlags(server_flags)) {
          argv.push_back(f);
        }
        marker = "serving furrballs.v1.Cache on ";
      }
      std::fprintf(stderr, "starting %s: %s\n", config.label.c_str(),
                   absl::StrJoin(argv, " ").c_str());
      server = ServerProcess::Start(argv, marker, std::chrono::seconds(30));
      if (server.ok()) break;
    }
    if (!server.ok()) {
      std::fprintf(stderr, "service_bench: %s: %s\n", config.name.c_str(),
                   std::string(server.status().message()).c_str());
      return 1;
    }
    auto load = std::make_unique<Load>(s, server->get(), metrics_port);
    absl::Status ready = load->Connect();
    if (ready.ok()) ready = load->Preload();
    if (!ready.ok()) {
      std::fprintf(stderr, "service_bench: %s at %s: %s\n",
                   config.name.c_str(), (*server)->address().c_str(),
                   std::string(ready.message()).c_str());
      return 1;
    }
    servers.push_back(std::move(*server));
    loads.push_back(std::move(load));
  }

  Results results;
  const size_t n = configs->size();
  for (int run = 0; run < s.runs; ++run) {
    for (const CellSpec& cell : *cells) {
      // The order rotates per run so that no configuration always follows
      // the same one.
      for (size_t k = 0; k < n; ++k) {
        const size_t i = (k + static_cast<size_t>(run)) % n;
        const ServerConfig& config = (*configs)[i];
        const Sample sample =
            loads[i]->Run(cell.kind, static_cast<uint64_t>(run) * n + i);
        results[config.name][cell.name].push_back(sample);
        std::fprintf(stderr,
                     "run %d/%d  %-9s %-28s %10.0f key ops/s  p50 %6.0f µs  "
                     "p99 %7.0f µs  cpu %5.1f µs/op  batch %4.1f%s\n",
                     run + 1, s.runs, cell.name.c_str(), config.label.c_str(),
                     sample.ops_per_s, sample.p50_us, sample.p99_us,
                     sample.cpu_us_per_op, sample.mean_batch,
                     sample.errors > 0
                         ? absl::StrCat("  errors ", sample.errors).c_str()
                         : "");
        if (csv != nullptr) {
          std::fprintf(csv, "%d,%s,%s,%.1f,%.1f,%.1f,%.2f,%.2f,%llu,%llu,%.3f\n",
                       run + 1, config.name.c_str(), cell.name.c_str(),
                       sample.ops_per_s, sample.p50_us, sample.p99_us,
                       sample.cpu_us_per_op, sample.mean_batch,
                       static_cast<unsigned long long>(sample.ops),
                       static_cast<unsigned long long>(sample.errors),
                       sample.local_hit_share);
          std::fflush(csv);
        }
      }
    }
  }
  loads.clear();
  for (auto& server : servers) server->Stop();
  if (csv != nullptr) std::fclose(csv);
  PrintReport(s, *configs, *cells, results, server_flags);
  return 0;
}

}  // namespace
}  // namespace furrballs::bench

int main(int argc, char** argv) { return furrballs::bench::Main(argc, argv); }
