// furrballs_server: the Furrballs gRPC cache server.
//
// Every setting is a flag; `--help` lists them with their defaults. The same
// names work in a config file (`--flagfile=path`, one `--name=value` per
// line) and as environment variables FURRBALLS_<NAME> (upper case), with the
// precedence command line > flagfile > environment > default.
#include <signal.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/flags/reflection.h>
#include <absl/flags/usage.h>
#include <absl/flags/usage_config.h>
#include <absl/strings/ascii.h>
#include <absl/strings/match.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_replace.h>

#include "metrics/metrics_exporter.h"
#include "service/request_stats.h"
#include "engine/common/hash_pair.h"
#include "engine/common/hash_secret_file.h"
#include "service/eager_binding.h"
#include "service/malloc_settings.h"
#include "service/server.h"
#include "service/startup_pages.h"
#include "service/startup_report.h"

ABSL_FLAG(std::string, listen_address, "127.0.0.1:50051",
          "host:port for gRPC. Loopback by default; 0.0.0.0:50051 to serve "
          "other hosts.");
ABSL_FLAG(std::string, metrics_address, "127.0.0.1:9464",
          "host:port serving Prometheus metrics at /metrics; empty disables "
          "them. Loopback by default.");
ABSL_FLAG(uint64_t, memory_mb, 256,
          "Memory budget in MiB over all nodes: everything the cache maps "
          "(values, key table, ARC state, spill write buffers), split evenly "
          "between nodes. Memory enters the RSS as it is used; the start-up "
          "line prints how it was divided.");
ABSL_FLAG(uint64_t, expected_item_bytes,
          furrballs::FurrBallOptions{}.expected_entry_bytes,
          "Key + value size the starting key table is planned for: as many "
          "key slots as fit with their metadata (~90 B each) when items are "
          "this large, the rest for values. A starting point, not a limit: "
          "smaller items make the table grow (paid with value pages, up to "
          "what the budget holds at the smallest item), larger ones fill the "
          "value pages first.");
ABSL_FLAG(uint64_t, page_kb, furrballs::FurrBallOptions{}.page_size_bytes >> 10,
          "Page size in KiB (the unit of placement, compaction and spill); 0 "
          "= chosen from the budget: a 256th of a node's share rounded down "
          "to a power of two, 64 to 2048 (2048 from 512 MiB a node), larger "
          "past 65536 pages a node (128 GiB); else a power "
          "of two from 64 to 32768 that gives a node at most 65536 pages. "
          "Values over an eighth of a page are stored in chunks.");
ABSL_FLAG(int, nodes, 0,
          "NUMA nodes to serve on. 0 = every node this process may use.");
ABSL_FLAG(int, simulate_nodes, 0,
          "If > 0, split the allowed CPUs into this many virtual NUMA nodes "
          "(for one-node machines and tests).");
ABSL_FLAG(uint32_t, simulated_remote_delay_ns, 0,
          "Busy-wait added to each simulated cross-node access.");
ABSL_FLAG(std::string, routing, "hash",
          "Key placement: hash (owner from the key's hash), round_robin, or "
          "thread_local.");
ABSL_FLAG(bool, migrate_to_readers, false,
          "Keys follow their readers: a key read mostly by threads of "
          "another node than its own moves there (docs/engine.md, \"Keys "
          "follow their readers\"). Needs --routing=round_robin or "
          "thread_local, and no --spill. Off: not yet measured to win "
          "beyond its own placement case.");
ABSL_FLAG(std::string, locate, "auto",
          "With --routing=round_robin or thread_local, how a Get finds a key "
          "the location cache does not name: scan (the nodes one after "
          "another, the caller's first), race (every node's worker probes "
          "at once, the first hit wins; never from a node worker, so only "
          "with --dispatch=direct), or auto (the race only while its "
          "measured saving exceeds its losing probes' cost; "
          "docs/engine.md).");
ABSL_FLAG(bool, location_cache, true,
          "With --routing=round_robin or thread_local: keep a hint of each "
          "key's node (2-4 bytes per key slot, inside --memory_mb), filled "
          "by writes and searches; a wrong hint costs one probe.");
ABSL_FLAG(uint64_t, max_key_bytes, 250, "Largest accepted key.");
ABSL_FLAG(uint64_t, max_value_bytes, 1 << 20, "Largest accepted value.");
ABSL_FLAG(std::optional<uint64_t>, hash_seed, std::nullopt,
          "Seed of the keyed hash, for tests and benchmarks that need the "
          "same key identities every run. Unset (the default): a random "
          "secret, so that clients cannot choose keys that collide; with "
          "--spill it is created once and kept in --data_dir/hash_secret "
          "(mode 0600) so that a warm restart finds its keys, without "
          "--spill a new one is drawn at every start. The start-up line "
          "prints the secret's fingerprint, never the secret.");
ABSL_FLAG(bool, spill, false,
          "Spill tier: cold pages go whole to a RocksDB under --data_dir and "
          "come back on a miss, so the cache holds more than --memory_mb "
          "(docs/spill.md). Needs --routing=hash.");
ABSL_FLAG(std::string, data_dir, "./furrballs-data",
          "Directory of the spill store (with --spill).");
ABSL_FLAG(uint64_t, spill_disk_mb, 1024,
          "Disk budget of the spill store; the oldest pages go first (0: no "
          "limit).");
ABSL_FLAG(bool, warm_restart, true,
          "With --spill: a graceful stop (SIGTERM) writes every resident "
          "page and the index, and the next start with the same --data_dir "
          "serves the same keys; false starts cold. After a crash the start "
          "is cold either way.");
ABSL_FLAG(std::string, spill_reload, "key",
          "With --spill, what a miss of a spilled key reads back: key (that "
          "key alone) or page (every key spilled with it, the report's "
          "speculative reload; for workloads that read such keys together).");
ABSL_FLAG(bool, spill_cold_pages, false,
          "With --spill: move ARC's coldest keys to COLD pages in memory and "
          "spill those pages whole (the report's compactor) instead of "
          "batching ARC's victims; measured no better here (docs/spill.md).");
ABSL_FLAG(std::string, dispatch, "direct",
          "direct: run each op in the gRPC thread against its owner's shard; "
          "nodejob: queue it to the owning node's worker (batched, write "
          "compaction). direct is the default because it measured faster "
          "here (docs/service_bench.md); try nodejob on multi-socket hosts.");
ABSL_FLAG(uint64_t, queue_depth, 4096,
          "Ops waiting per node before RPCs fail with RESOURCE_EXHAUSTED.");
ABSL_FLAG(uint64_t, max_batch, 64,
          "Ops a node worker takes per batch (1 to 65536).");
ABSL_FLAG(bool, write_compaction, true,
          "Merge same-key unconditional Sets inside a batch.");
ABSL_FLAG(uint64_t, max_message_bytes, 16 << 20,
          "Largest gRPC message received or sent.");
ABSL_FLAG(int, max_concurrent_streams, 1024,
          "HTTP/2 streams per client connection.");
ABSL_FLAG(uint64_t, max_pipeline_in_flight, 256,
          "Pipeline ops in flight per stream before reading pauses.");
ABSL_FLAG(uint64_t, max_in_flight, 16384,
          "Cache operations running at once over the whole server (a unary "
          "RPC is one, a MultiGet/MultiSet one per key or item, a Pipeline "
          "frame one, a Batch message one per op). Past it a unary call is "
          "answered RESOURCE_EXHAUSTED at once, before its body is parsed, "
          "and so is a Pipeline op or a whole Batch message, with the "
          "stream left open. Bounds the requests the server holds; at "
          "least --max_batch_ops; 0: no cap.");
ABSL_FLAG(int64_t, max_in_flight_mb, -1,
          "MiB of unary requests (the messages of Set, MultiSet, Get, ...) "
          "the server holds at once, counted from a request's admission "
          "until it is answered. A MultiSet waits, unread by gRPC, until it "
          "fits (its size is unknown before it is read: it counts as the "
          "largest of the last 16 MultiSets until it is), and once read it "
          "counts 20 KiB more for the call's own state, until gRPC ends the "
          "call; another request is "
          "counted once gRPC has received it and is answered "
          "RESOURCE_EXHAUSTED at once if it does not fit. A request runs "
          "when nothing else is held, so a message larger than this still "
          "runs, alone. -1 (the default): 1/20 of --memory_mb plus 12 MiB "
          "(15 MiB at 64 MiB), what the RSS bound of 1.05 x --memory_mb + "
          "24 MiB leaves beside the process's own 12 MiB. 0: no cap.");
ABSL_FLAG(uint64_t, grpc_memory_mb, 256,
          "Memory gRPC may use for its connection and message buffers (a "
          "gRPC ResourceQuota): past it gRPC shrinks its read windows and "
          "refuses new connections instead of growing the process. Counted "
          "apart from --memory_mb; 0: no quota (gRPC's default).");
ABSL_FLAG(bool, grpc_bdp_probe, false,
          "Let gRPC probe each connection's bandwidth-delay product and grow "
          "its HTTP/2 windows to match (up to 16 MiB per stream while "
          "--grpc_memory_mb is less than 20% used), shrinking them as it "
          "fills (gRPC's default). Off, the stream window stays at 64 KiB, "
          "which is what a MultiSet waiting for --max_in_flight_mb may have "
          "sent unread; on, waiting MultiSets can hold up to the grown window "
          "each, past the RSS bound. Off cost 20-30% more server CPU per "
          "large value received in 2026-11-25 runs (docs/memory_bench.md). Turn "
          "it on for clients far away (a high bandwidth-delay product) when CPU or "
          "throughput matters more than the RSS bound.");
ABSL_FLAG(int, grpc_callback_threads, -1,
          "gRPC callback threads left to serve the server; gRPC runs "
          "max(2, cores / 2) (at most 16) and the others are parked while "
          "it serves. One cut server CPU per key op and per call by about a "
          "third on a 2-core machine (fewer thread hand-offs per message; "
          "docs/service_bench.md) but caps gRPC's work at about one core. "
          "-1: automatic, 1 on a machine of at most 2 cores (where it was "
          "measured) with gRPC 1.51, else gRPC's own number; 0: gRPC's own "
          "number; N: at most N (gRPC 1.51 only).");
ABSL_FLAG(uint64_t, max_batch_ops, 4096,
          "Operations in one Batch message, and keys or items in one "
          "MultiGet or MultiSet; more is INVALID_ARGUMENT, answered before "
          "anything is built for it.");
ABSL_FLAG(uint64_t, max_stream_bytes, 64 << 20,
          "Bytes one Batch or Pipeline stream may hold (requests read and "
          "answers not yet written; a read message or op is counted with "
          "the largest answer it can have) before the server stops reading "
          "it: a client that stops reading holds at most this plus one "
          "message's share.");
ABSL_FLAG(uint64_t, max_response_bytes, 4 << 20,
          "Bytes of values one MultiGet or Batch answer carries: a Get whose "
          "value would take the answer over it is answered "
          "RESOURCE_EXHAUSTED on its own (the values that fit are answered), "
          "counted as the values are read, so an answer is never built "
          "larger. At least --max_value_bytes; with 256 bytes of framing per "
          "op of --max_batch_ops it must fit in --max_message_bytes. 4 MiB "
          "is also what gRPC clients accept by default.");
ABSL_FLAG(uint64_t, keepalive_min_ping_ms, 10000,
          "Clients pinging more often than this are disconnected.");
ABSL_FLAG(uint64_t, shutdown_deadline_ms, 10000,
          "On SIGTERM/SIGINT, time in-flight RPCs get before cancellation.");
ABSL_FLAG(uint64_t, shutdown_drain_ms, 0,
          "On SIGTERM/SIGINT, time health reports NOT_SERVING and new RPCs "
          "are answered UNAVAILABLE before connections close (0: close at "
          "once; behind a load balancer, set it above the health-check "
          "period).");
// Security (docs/security.md).
ABSL_FLAG(std::string, tls_cert_file, "",
          "PEM certificate chain (leaf first) for TLS on --listen_address; "
          "empty serves plaintext. Re-read every --security_reload_s, so a "
          "rotated Kubernetes Secret takes effect without a restart.");
ABSL_FLAG(std::string, tls_key_file, "",
          "PEM private key (unencrypted) of --tls_cert_file.");
ABSL_FLAG(std::string, tls_client_ca_file, "",
          "PEM CA bundle; turns on mTLS: a client without a certificate "
          "signed by one of these CAs fails the handshake.");
ABSL_FLAG(std::string, auth_token_file, "",
          "Bearer tokens, one '<role> <token>' per line (role read-only or "
          "read-write; '#' starts a comment). Every Cache call then needs "
          "'authorization: Bearer <token>': UNAUTHENTICATED without a listed "
          "token, PERMISSION_DENIED for a write with a read-only one. Health "
          "and reflection stay open. Re-read every --security_reload_s. "
          "Empty: no token needed.");
ABSL_FLAG(uint64_t, security_reload_s, 10,
          "Seconds between reads of the --tls_* files and --auth_token_file; "
          "changed files take effect without a restart (at least 1).");
ABSL_FLAG(std::string, health_address, "",
          "host:port of a plaintext listener serving only grpc.health.v1, for "
          "health checkers that cannot do TLS (the kubelet's gRPC probes); "
          "empty: none.");

namespace furrballs::service {
namespace {

// The two below copy the service's counters into metrics/' plain counters:
// this file is the composition root above both, so that metrics/ needs no
// service type and the service does not know it is exported.
metrics::RequestCounts ToRequestCounts(const RequestStatsSnapshot& s) {
  metrics::RequestCounts counts;
  for (int c = 0; c < kStatusCodeCount; ++c) {
    counts.code_names.emplace_back(StatusCodeName(c));
  }
  counts.latency_bounds_ns.assign(kLatencyBucketBoundsNs.begin(),
                                  kLatencyBucketBoundsNs.end());
  for (int o = 0; o < kRequestOpCount; ++o) {
    metrics::RequestCounts::Op op;
    op.name = std::string(RequestOpName(static_cast<RequestOp>(o)));
    op.by_code.assign(s.requests[o].begin(), s.requests[o].end());
    op.latency_buckets.assign(s.latency_buckets[o].begin(),
                              s.latency_buckets[o].end());
    op.latency_sum_ns = s.latency_sum_ns[o];
    counts.ops.push_back(std::move(op));
  }
  return counts;
}

std::vector<metrics::WorkerCounts> ToWorkerCounts(
    const std::vector<DispatchStats>& workers) {
  std::vector<metrics::WorkerCounts> counts(workers.size());
  for (size_t i = 0; i < workers.size(); ++i) {
    counts[i].node = workers[i].node;
    counts[i].batches = workers[i].batches;
    counts[i].ops = workers[i].ops;
    counts[i].merged_writes = workers[i].merged_writes;
    counts[i].deadline_expired = workers[i].deadline_expired;
    counts[i].rejected_queue_full = workers[i].rejected_queue_full;
    counts[i].queue_depth = workers[i].queue_depth;
  }
  return counts;
}

// Serves `server`'s statistics at `address`; the exporter must be destroyed
// before the server, whose engine, dispatcher and service it reads.
absl::StatusOr<std::unique_ptr<metrics::MetricsExporter>> StartMetrics(
    const std::string& address, const Server& server) {
  const FurrBall* engine = server.engine();
  const Dispatcher* dispatcher = server.dispatcher();
  const RequestStats* requests = &server.request_stats();
  metrics::StatsSources sources;
  sources.engine = [engine] { return engine->Stats(); };
  sources.dispatch = [dispatcher] {
    return ToWorkerCounts(dispatcher->Stats());
  };
  sources.requests = [requests] {
    return ToRequestCounts(requests->Snapshot());
  };
  return metrics::MetricsExporter::Start(address, std::move(sources));
}

// Applies FURRBALLS_<NAME> environment variables to this binary's flags. Runs
// before command-line parsing, which therefore overrides it.
bool ApplyEnvironment(std::string* error) {
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (flag->Filename().find("service/main.cc") == std::string::npos) {
      continue;
    }
    const std::string var =
        absl::StrCat("FURRBALLS_", absl::AsciiStrToUpper(name));
    const char* value = std::getenv(var.c_str());
    if (value == nullptr) continue;
    std::string why;
    if (!flag->ParseFrom(value, &why)) {
      *error = absl::StrCat(var, "=", value, ": ", why);
      return false;
    }
  }
  return true;
}

// `value` << `shift` (a flag in MiB or KiB, in bytes), or why it does not
// fit 64 bits: shifted out, it would wrap to a small or zero size.
absl::StatusOr<uint64_t> Bytes(const char* flag, uint64_t value, int shift) {
  if (value > (UINT64_MAX >> shift)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, "=", value, ": more than 2^64 bytes"));
  }
  return value << shift;
}

// Why `flag`=`value` is refused: a count or size that must be at least 1.
absl::Status AtLeastOne(const char* flag, int64_t value) {
  return absl::InvalidArgumentError(
      absl::StrCat("--", flag, "=", value, ": must be at least 1"));
}

// A batch is scratch that each node's dispatcher allocates at start-up, and
// indexed by int: far beyond any useful batch, 2^16 keeps it small.
constexpr uint64_t kMaxBatch = 65536;

absl::StatusOr<ServerOptions> OptionsFromFlags() {
  ServerOptions o;
  o.listen_address = absl::GetFlag(FLAGS_listen_address);
  const absl::StatusOr<uint64_t> memory =
      Bytes("memory_mb", absl::GetFlag(FLAGS_memory_mb), 20);
  if (!memory.ok()) return memory.status();
  if (*memory == 0) return AtLeastOne("memory_mb", 0);
  o.engine.memory_budget_bytes = *memory;
  const absl::StatusOr<uint64_t> page =
      Bytes("page_kb", absl::GetFlag(FLAGS_page_kb), 10);
  if (!page.ok()) return page.status();
  o.engine.page_size_bytes = *page;
  const uint64_t item_bytes = absl::GetFlag(FLAGS_expected_item_bytes);
  if (item_bytes < 16) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--expected_item_bytes=", item_bytes, ": must be at least 16"));
  }
  o.engine.expected_entry_bytes = item_bytes;
  const int simulate = absl::GetFlag(FLAGS_simulate_nodes);
  if (simulate < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--simulate_nodes=", simulate, ": must be 0 (the real topology) or "
        "a node count"));
  }
  o.engine.simulate_topology = simulate > 0;
  o.engine.node_count = simulate > 0 ? simulate : absl::GetFlag(FLAGS_nodes);
  o.engine.simulated_remote_delay_ns =
      absl::GetFlag(FLAGS_simulated_remote_delay_ns);
  const std::string routing = absl::GetFlag(FLAGS_routing);
  if (routing == "hash") {
    o.engine.routing = RoutingPolicy::kHash;
  } else if (routing == "round_robin") {
    o.engine.routing = RoutingPolicy::kRoundRobin;
  } else if (routing == "thread_local") {
    o.engine.routing = RoutingPolicy::kThreadLocal;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--routing=", routing, ": expected hash, round_robin or thread_local"));
  }
  o.engine.migrate_to_readers = absl::GetFlag(FLAGS_migrate_to_readers);
  const std::string locate = absl::GetFlag(FLAGS_locate);
  if (locate == "scan") {
    o.engine.locate = LocatePolicy::kScan;
  } else if (locate == "race") {
    o.engine.locate = LocatePolicy::kRace;
  } else if (locate == "auto") {
    o.engine.locate = LocatePolicy::kAuto;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--locate=", locate, ": expected scan, race or auto"));
  }
  o.engine.location_cache = absl::GetFlag(FLAGS_location_cache);
  o.engine.max_key_bytes = absl::GetFlag(FLAGS_max_key_bytes);
  o.engine.max_value_bytes = absl::GetFlag(FLAGS_max_value_bytes);
  if (o.engine.max_value_bytes == 0) return AtLeastOne("max_value_bytes", 0);
  o.engine.hash_seed = absl::GetFlag(FLAGS_hash_seed).value_or(0);
  if (absl::GetFlag(FLAGS_spill)) {
    o.engine.spill_dir = absl::GetFlag(FLAGS_data_dir);
    if (o.engine.spill_dir.empty()) {
      return absl::InvalidArgumentError("--spill needs a --data_dir");
    }
    const absl::StatusOr<uint64_t> disk =
        Bytes("spill_disk_mb", absl::GetFlag(FLAGS_spill_disk_mb), 20);
    if (!disk.ok()) return disk.status();
    o.engine.spill_disk_budget_bytes = *disk;
    o.engine.warm_restart = absl::GetFlag(FLAGS_warm_restart);
    o.engine.spill_cold_pages = absl::GetFlag(FLAGS_spill_cold_pages);
  }
  const std::string reload = absl::GetFlag(FLAGS_spill_reload);
  if (reload != "key" && reload != "page") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--spill_reload=", reload, ": expected key or page"));
  }
  o.engine.spill_reload_whole_page = reload == "page";
  const std::string dispatch = absl::GetFlag(FLAGS_dispatch);
  if (dispatch == "nodejob") {
    o.dispatch.mode = DispatchMode::kNodeJob;
  } else if (dispatch == "direct") {
    o.dispatch.mode = DispatchMode::kDirect;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--dispatch=", dispatch, ": expected nodejob or direct"));
  }
  o.dispatch.queue_capacity = absl::GetFlag(FLAGS_queue_depth);
  o.dispatch.max_batch = absl::GetFlag(FLAGS_max_batch);
  o.dispatch.write_compaction = absl::GetFlag(FLAGS_write_compaction);
  if (o.dispatch.max_batch == 0 || o.dispatch.queue_capacity == 0) {
    return absl::InvalidArgumentError(
        "--max_batch and --queue_depth must be at least 1");
  }
  if (o.dispatch.max_batch > kMaxBatch) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_batch=", o.dispatch.max_batch, ": must be at most ",
        kMaxBatch));
  }
  o.max_message_bytes = absl::GetFlag(FLAGS_max_message_bytes);
  // gRPC takes the limit as an int: a larger one would wrap to a negative
  // value (the server started and served with it), not the limit asked for.
  if (o.max_message_bytes > static_cast<uint64_t>(INT_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_bytes=", o.max_message_bytes,
                     ": must be at most ", INT_MAX, " (gRPC's limit)"));
  }
  if (o.max_message_bytes < o.engine.max_value_bytes + 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--max_message_bytes=", o.max_message_bytes,
        " cannot carry a value of --max_value_bytes=",
        o.engine.max_value_bytes));
  }
  o.max_concurrent_streams = absl::GetFlag(FLAGS_max_concurrent_streams);
  if (o.max_concurrent_streams < 1) {
    return AtLeastOne("max_concurrent_streams", o.max_concurrent_streams);
  }
  o.stream_limits.max_pipeline_in_flight =
      absl::GetFlag(FLAGS_max_pipeline_in_flight);
  o.stream_limits.max_batch_ops = absl::GetFlag(FLAGS_max_batch_ops);
  o.stream_limits.max_stream_bytes = absl::GetFlag(FLAGS_max_stream_bytes);
  o.stream_limits.max_response_bytes =
      absl::GetFlag(FLAGS_max_response_bytes);
  for (const auto& [flag, value] :
       {std::pair{"max_pipeline_in_flight",
                  o.stream_limits.max_pipeline_in_flight},
        std::pair{"max_batch_ops", o.stream_limits.max_batch_ops},
        std::pair{"max_stream_bytes", o.stream_limits.max_stream_bytes}}) {
    if (value == 0) return AtLeastOne(flag, 0);
  }
  o.stream_limits.max_in_flight = absl::GetFlag(FLAGS_max_in_flight);
  const int64_t in_flight_mb = absl::GetFlag(FLAGS_max_in_flight_mb);
  if (in_flight_mb < -1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_in_flight_mb=", in_flight_mb,
                     ": must be -1 (from --memory_mb), 0 (no cap) or more"));
  }
  if (in_flight_mb == -1) {
    o.stream_limits.max_in_flight_bytes = RequestBytesForBudget(*memory);
  } else {
    const absl::StatusOr<uint64_t> in_flight_bytes = Bytes(
        "max_in_flight_mb", static_cast<uint64_t>(in_flight_mb), 20);
    if (!in_flight_bytes.ok()) return in_flight_bytes.status();
    o.stream_limits.max_in_flight_bytes = *in_flight_bytes;
  }
  const absl::StatusOr<uint64_t> grpc_memory =
      Bytes("grpc_memory_mb", absl::GetFlag(FLAGS_grpc_memory_mb), 20);
  if (!grpc_memory.ok()) return grpc_memory.status();
  o.grpc_memory_bytes = *grpc_memory;
  o.grpc_bdp_probe = absl::GetFlag(FLAGS_grpc_bdp_probe);
  o.grpc_callback_threads = absl::GetFlag(FLAGS_grpc_callback_threads);
  if (o.grpc_callback_threads < -1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--grpc_callback_threads=", o.grpc_callback_threads,
        ": must be -1 (automatic), 0 (gRPC's own number) or more"));
  }
  if (o.grpc_callback_threads == -1) {
    o.grpc_callback_threads = CallbackThreadLimit::Automatic();
  }
  o.keepalive_min_ping_interval =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_keepalive_min_ping_ms));
  o.shutdown_deadline =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_shutdown_deadline_ms));
  o.shutdown_drain =
      std::chrono::milliseconds(absl::GetFlag(FLAGS_shutdown_drain_ms));
  o.tls.cert_file = absl::GetFlag(FLAGS_tls_cert_file);
  o.tls.key_file = absl::GetFlag(FLAGS_tls_key_file);
  o.tls.client_ca_file = absl::GetFlag(FLAGS_tls_client_ca_file);
  o.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
  const uint64_t reload_s = absl::GetFlag(FLAGS_security_reload_s);
  if (reload_s < 1) {
    return absl::InvalidArgumentError(
        "--security_reload_s must be at least 1");
  }
  o.security_reload_interval = std::chrono::seconds(reload_s);
  o.health_address = absl::GetFlag(FLAGS_health_address);
  return o;
}

// Without --hash_seed: the random secret of this run (see the flag), in
// options->engine.hash_secret. Returns what the start-up line says of it.
absl::StatusOr<std::string> ChooseHashSecret(ServerOptions* options) {
  if (absl::GetFlag(FLAGS_hash_seed).has_value()) return "from --hash_seed";
  if (options->engine.spill_dir.empty()) {
    absl::StatusOr<HashSecret> secret = RandomHashSecret();
    if (!secret.ok()) return secret.status();
    options->engine.hash_secret = *secret;
    return "random, for this run only (no --spill)";
  }
  absl::StatusOr<LoadedHashSecret> loaded =
      LoadOrCreateHashSecret(options->engine.spill_dir);
  if (!loaded.ok()) return loaded.status();
  options->engine.hash_secret = loaded->secret;
  switch (loaded->origin) {
    case LoadedHashSecret::Origin::kLoaded:
      return absl::StrCat("random, kept in ", loaded->path);
    case LoadedHashSecret::Origin::kCreated:
      return absl::StrCat("random, new in ", loaded->path);
    case LoadedHashSecret::Origin::kReplaced:
      return absl::StrCat("random, new in ", loaded->path, " (the old file ",
                          "was unreadable: ", loaded->note,
                          "; spilled data from before is not served)");
  }
  return absl::InternalError("unknown secret origin");
}

// The engine names its options (FurrBallOptions) in the errors of its
// start-up checks; a user of this binary set flags. Rewrites the options
// that flags set in the same unit into those flags' names ("max_key_bytes
// = 0" -> "--max_key_bytes=0") and names the flag beside the others.
std::string WithFlagNames(std::string message) {
  static constexpr std::pair<const char*, const char*> kNames[] = {
      {"max_key_bytes = ", "--max_key_bytes="},
      {"max_value_bytes = ", "--max_value_bytes="},
      {"raise page_size_bytes", "raise --page_kb"},
      {"page_size_bytes = ", "page size (--page_kb, in bytes) = "},
      {"node_count = ", "node count (--nodes or --simulate_nodes) = "},
      {"spill_dir needs routing = kHash", "--spill needs --routing=hash"},
      {"migrate_to_readers cannot be combined with spill_dir",
       "--migrate_to_readers cannot be combined with --spill"},
      {"migrate_to_readers needs routing = kRoundRobin or kThreadLocal",
       "--migrate_to_readers needs --routing=round_robin or thread_local"},
      {"memory budget of ", "--memory_mb: a budget of "},
  };
  for (const auto& [option, flag] : kNames) {
    message = absl::StrReplaceAll(message, {{option, flag}});
  }
  return message;
}

int Main(int argc, char** argv) {
  // Before any thread allocates: request buffers go back to the system when
  // freed instead of staying in glibc's arenas (malloc_settings.h).
  if (absl::Status s = FixMallocThresholds(); !s.ok()) {
    std::fprintf(stderr, "furrballs: cannot start: %s\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  // --help lists the flags of this file. Abseil's default matches flag files
  // against the program's name, which finds nothing here (the binary is
  // furrballs_server, the flags live in service/main.cc).
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view file) {
    return absl::EndsWith(file, "service/main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Furrballs, a topology-aware key-value cache served over gRPC.\n"
      "Flags may also come from --flagfile=FILE (lines of --name=value) and "
      "from environment variables FURRBALLS_<NAME>. SIGTERM or SIGINT "
      "drains and stops it; SIGUSR1 prints glibc's allocator state (every "
      "arena) to stderr and it serves on.");
  std::string env_error;
  if (!ApplyEnvironment(&env_error)) {
    std::fprintf(stderr, "furrballs: bad environment variable %s\n",
                 env_error.c_str());
    return 2;
  }
  absl::ParseCommandLine(argc, argv);
  auto options = OptionsFromFlags();
  if (!options.ok()) {
    std::fprintf(stderr, "furrballs: %s\n",
                 std::string(options.status().message()).c_str());
    return 2;
  }

  // Block the stop signals and SIGUSR1 in every thread (workers and gRPC
  // threads inherit this mask) so that only sigwait below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGUSR1);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  absl::StatusOr<std::string> secret = ChooseHashSecret(&*options);
  if (!secret.ok()) {
    std::fprintf(stderr, "furrballs: cannot start: hash secret: %s\n",
                 secret.status().ToString().c_str());
    return 1;
  }
  auto server = Server::Start(*options);
  if (!server.ok()) {
    std::fprintf(stderr, "furrballs: cannot start: %s\n",
                 WithFlagNames(std::string(server.status().message())).c_str());
    return 1;
  }
  // Empty disables metrics (tests run many servers at once).
  const std::string metrics_address = absl::GetFlag(FLAGS_metrics_address);
  std::unique_ptr<metrics::MetricsExporter> exporter;
  if (!metrics_address.empty()) {
    auto started = StartMetrics(metrics_address, **server);
    if (!started.ok()) {
      std::fprintf(stderr, "furrballs: cannot start: %s\n",
                   std::string(started.status().message()).c_str());
      return 1;
    }
    exporter = std::move(*started);
  }
  PrintConfiguration(**server, *secret,
                     absl::GetFlag(FLAGS_hash_seed).has_value());
  // Start-up is over: what it mapped of the code and never runs again
  // leaves the RSS (startup_pages.h), before the line that says we serve.
  absl::StatusOr<ReleasedPages> released = ReleaseStartUpPages();
  if (released.ok()) {
    std::printf("furrballs: start-up: %.1f MiB of code and read-only data "
                "pages unmapped (they stay in the page cache)\n",
                released->resident_bytes / 1048576.0);
  } else {
    std::printf("furrballs: start-up pages kept: %s\n",
                std::string(released.status().message()).c_str());
  }
  PrintServing(**server);

  int signal = 0;
  // SIGUSR1 prints what the allocator holds, arena by arena, and serving
  // goes on: what a large RSS is made of (bench/memory/rss_stress).
  while (sigwait(&stop_signals, &signal) == 0 && signal == SIGUSR1) {
    PrintAllocatorState();
  }
  std::printf("furrballs: %s received, shutting down (deadline %lld ms)\n",
              signal == SIGTERM ? "SIGTERM" : "SIGINT",
              static_cast<long long>(options->shutdown_deadline.count()));
  std::fflush(stdout);
  (*server)->Shutdown();
  exporter.reset();
  std::printf("furrballs: stopped\n");
  return 0;
}

}  // namespace
}  // namespace furrballs::service

int main(int argc, char** argv) {
  // First, before any thread exists: this may replace the process image.
  furrballs::service::ReexecWithEagerBinding(argv);
  return furrballs::service::Main(argc, argv);
}
