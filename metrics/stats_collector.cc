#include "metrics/stats_collector.h"

#include <initializer_list>
#include <limits>
#include <string>
#include <utility>

#include "metrics/build_info.h"
#include "metrics/process_stats.h"

namespace furrballs::metrics {
namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

constexpr double kNanosPerSecond = 1e9;

void AddSample(MetricFamily& family, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (family.type == MetricType::Counter) {
    m.counter.value = value;
  } else {
    m.gauge.value = value;
  }
  family.metric.push_back(std::move(m));
}

// One value of a per-node family: a snapshot field, and the value of the
// family's extra label (locality, reason, tier) when it has one.
template <typename Snapshot>
struct Split {
  const char* label_value;
  uint64_t Snapshot::*field;
};

// Appends a family with one sample per node and split. `nodes[i]` is the
// `node` label of snapshots[i]; `label` names the extra label, or is null
// for a family with a single split.
template <typename Snapshot>
void AddPerNode(std::vector<MetricFamily>& out, const char* name,
                const char* help, MetricType type,
                const std::vector<Snapshot>& snapshots,
                const std::vector<std::string>& nodes, const char* label,
                std::initializer_list<Split<Snapshot>> splits) {
  MetricFamily family{name, help, type, {}};
  for (size_t i = 0; i < snapshots.size(); ++i) {
    for (const Split<Snapshot>& split : splits) {
      Labels labels = {{"node", nodes[i]}};
      if (label != nullptr) labels.push_back({label, split.label_value});
      AddSample(family, std::move(labels),
                static_cast<double>(snapshots[i].*split.field));
    }
  }
  out.push_back(std::move(family));
}

void AddBuildInfo(std::vector<MetricFamily>& out) {
  MetricFamily family{"furrballs_build_info",
                      "Always 1; the labels say which build is running.",
                      MetricType::Gauge,
                      {}};
  AddSample(family,
            {{"version", std::string(BuildVersion())},
             {"git_commit", std::string(BuildGitCommit())}},
            1);
  out.push_back(std::move(family));
}

void AddRequests(std::vector<MetricFamily>& out,
                 const RequestCounts& s) {
  // Every op x code pair is exported, zeros included, so that a rate over
  // an error code that occurs for the first time sees its first increment.
  MetricFamily requests{
      "furrballs_requests_total",
      "Finished requests by RPC and gRPC status code, rejections included "
      "(pipeline: one per streamed item).",
      MetricType::Counter,
      {}};
  MetricFamily latency{
      "furrballs_request_duration_seconds",
      "Time from the handler's entry to Finish, inside the server (excludes "
      "the network and gRPC transport).",
      MetricType::Histogram,
      {}};
  for (const RequestCounts::Op& o : s.ops) {
    for (size_t c = 0; c < o.by_code.size() && c < s.code_names.size(); ++c) {
      AddSample(requests, {{"op", o.name}, {"code", s.code_names[c]}},
                static_cast<double>(o.by_code[c]));
    }
    ClientMetric m;
    m.label = {{"op", o.name}};
    uint64_t cumulative = 0;
    for (size_t b = 0; b < o.latency_buckets.size(); ++b) {
      cumulative += o.latency_buckets[b];
      const double upper =
          b < s.latency_bounds_ns.size()
              ? static_cast<double>(s.latency_bounds_ns[b]) / kNanosPerSecond
              : std::numeric_limits<double>::infinity();
      m.histogram.bucket.push_back({cumulative, upper});
    }
    // The count is the +Inf bucket, not the request counter, so the
    // histogram is self-consistent even when a scrape lands between the two
    // increments of one Record().
    m.histogram.sample_count = cumulative;
    m.histogram.sample_sum =
        static_cast<double>(o.latency_sum_ns) / kNanosPerSecond;
    latency.metric.push_back(std::move(m));
  }
  out.push_back(std::move(requests));
  out.push_back(std::move(latency));
}

void AddEngine(std::vector<MetricFamily>& out,
               const std::vector<NodeStatsSnapshot>& s) {
  using N = NodeStatsSnapshot;
  constexpr auto kCounter = MetricType::Counter;
  constexpr auto kGauge = MetricType::Gauge;
  std::vector<std::string> nodes;
  for (const N& n : s) nodes.push_back(std::to_string(n.node));

  AddPerNode<N>(out, "furrballs_hits_total",
                "Gets that found a live entry, by whether the thread that "
                "served it ran on the key's node (local) or not (remote).",
                kCounter, s, nodes, "locality",
                {{"local", &N::hits_local}, {"remote", &N::hits_remote}});
  AddPerNode<N>(out, "furrballs_migrations_total",
                "Keys moved between nodes because another node's threads "
                "read them (migrate_to_readers): in = moved to this node, "
                "out = moved away from it.",
                kCounter, s, nodes, "direction",
                {{"in", &N::migrations_in}, {"out", &N::migrations_out}});
  AddPerNode<N>(out, "furrballs_misses_total",
                "Gets that found no live entry.", kCounter, s, nodes, nullptr,
                {{nullptr, &N::misses}});
  AddPerNode<N>(out, "furrballs_sets_total", "Writes applied.", kCounter, s,
                nodes, nullptr, {{nullptr, &N::sets}});
  AddPerNode<N>(out, "furrballs_in_place_sets_total",
                "Overwrites that reused the entry's space in place.", kCounter,
                s, nodes, nullptr, {{nullptr, &N::in_place_sets}});
  AddPerNode<N>(out, "furrballs_staging_sets_total",
                "Writes that overflowed to the staging page.", kCounter, s,
                nodes, nullptr, {{nullptr, &N::staging_sets}});
  AddPerNode<N>(out, "furrballs_deletes_total", "Deletes applied.", kCounter,
                s, nodes, nullptr, {{nullptr, &N::deletes}});
  AddPerNode<N>(out, "furrballs_touches_total", "TTL resets applied.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::touches}});
  AddPerNode<N>(out, "furrballs_expirations_total",
                "Entries removed because their TTL ran out.", kCounter, s,
                nodes, nullptr, {{nullptr, &N::ttl_expirations}});
  AddPerNode<N>(out, "furrballs_evictions_total",
                "Live entries evicted to make room: capacity = ARC chose a "
                "victim for value memory, key_table = the key table was full.",
                kCounter, s, nodes, "reason",
                {{"capacity", &N::evictions_capacity},
                 {"key_table", &N::evictions_keys}});
  AddPerNode<N>(out, "furrballs_page_evictions_total",
                "Whole pages whose keys a writer evicted because it found no "
                "room at all (the keys also count as capacity evictions).",
                kCounter, s, nodes, nullptr, {{nullptr, &N::page_evictions}});
  AddPerNode<N>(out, "furrballs_keys", "Live entries.", kGauge, s, nodes,
                nullptr, {{nullptr, &N::live_keys}});

  // Used memory is what the pages hold, live or dead: dead bytes are only
  // returned by compaction, so they count against the limit until then.
  MetricFamily used{"furrballs_memory_used_bytes",
                    "Value-page bytes holding entries, live or dead "
                    "(not yet reclaimed).",
                    kGauge,
                    {}};
  for (size_t i = 0; i < s.size(); ++i) {
    AddSample(used, {{"node", nodes[i]}},
              static_cast<double>(s[i].live_bytes + s[i].dead_bytes));
  }
  out.push_back(std::move(used));
  AddPerNode<N>(out, "furrballs_memory_limit_bytes",
                "Value-page bytes in service on the node (a hard limit; pages "
                "retired to pay for a larger key table are not counted).",
                kGauge, s, nodes, nullptr, {{nullptr, &N::memory_limit_bytes}});
  AddPerNode<N>(out, "furrballs_dead_bytes",
                "Bytes of overwritten, deleted or evicted entries not yet "
                "reclaimed by compaction.",
                kGauge, s, nodes, nullptr, {{nullptr, &N::dead_bytes}});
  AddPerNode<N>(out, "furrballs_pages", "Pages by tier.", kGauge, s, nodes,
                "tier",
                {{"hot", &N::pages_hot},
                 {"cold", &N::pages_cold},
                 {"empty", &N::pages_empty},
                 {"freeze", &N::pages_freeze},
                 {"staging", &N::pages_staging},
                 {"retired", &N::pages_retired}});
  AddPerNode<N>(out, "furrballs_key_table_capacity",
                "Keys the node's key table (ARC's c) holds at most now; it "
                "grows, paid with retired pages, when entries are smaller "
                "than it was planned for.",
                kGauge, s, nodes, nullptr, {{nullptr, &N::key_table_capacity}});
  AddPerNode<N>(out, "furrballs_key_table_growths_total",
                "Growths of the node's key table completed.", kCounter, s,
                nodes, nullptr, {{nullptr, &N::key_table_growths}});
  AddPerNode<N>(out, "furrballs_key_table_shrinks_total",
                "Shrinks of the node's key table completed (its entries "
                "became larger; the memory went back to the value pages).",
                kCounter, s, nodes, nullptr,
                {{nullptr, &N::key_table_shrinks}});
  AddPerNode<N>(out, "furrballs_staging_used_bytes",
                "Bytes used in the staging page (the SET overflow).", kGauge, s,
                nodes, nullptr, {{nullptr, &N::staging_used_bytes}});
  AddPerNode<N>(out, "furrballs_padding_bytes_total",
                "Bytes lost to entry alignment and to page tails left unused "
                "when a page was sealed.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::padding_bytes}});
  AddPerNode<N>(out, "furrballs_relocations_total",
                "Entries moved out of staging or draining pages.", kCounter, s,
                nodes, nullptr, {{nullptr, &N::relocations}});
  AddPerNode<N>(out, "furrballs_pages_drained_total",
                "Pages emptied by drain compaction.", kCounter, s, nodes,
                nullptr, {{nullptr, &N::pages_drained}});
  AddPerNode<N>(out, "furrballs_pages_recycled_total",
                "Pages returned to EMPTY by drain, by eviction, or because all "
                "their entries died.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::pages_recycled}});
  AddPerNode<N>(out, "furrballs_promote_drops_total",
                "ARC promotions dropped because the PromoteBuf was full.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::promote_drops}});
  AddPerNode<N>(out, "furrballs_reclaim_waits_total",
                "Rounds in which a writer with no room waited for another "
                "thread's operation in flight to release a page.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::reclaim_waits}});

  // Spill tier (docs/spill.md); zero when it is off.
  AddPerNode<N>(out, "furrballs_spill_pages_written_total",
                "Whole pages written to the spill store.", kCounter, s, nodes,
                nullptr, {{nullptr, &N::spill_pages_written}});
  AddPerNode<N>(out, "furrballs_spill_written_bytes_total",
                "Page-blob bytes written to the spill store.", kCounter, s,
                nodes, nullptr, {{nullptr, &N::spill_bytes_written}});
  AddPerNode<N>(out, "furrballs_spill_keys_written_total",
                "Keys that left memory for the spill store.", kCounter, s,
                nodes, nullptr, {{nullptr, &N::spill_keys_written}});
  AddPerNode<N>(out, "furrballs_spill_reloads_total",
                "Spilled pages read back because a Get missed a key on them "
                "(ghost hits).",
                kCounter, s, nodes, nullptr, {{nullptr, &N::spill_reloads}});
  AddPerNode<N>(out, "furrballs_spill_reloaded_keys_total",
                "Keys re-inserted by those reloads.", kCounter, s, nodes,
                nullptr, {{nullptr, &N::spill_reloaded_keys}});
  AddPerNode<N>(out, "furrballs_spill_ghost_hits_total",
                "Gets answered after a reload (also counted as hits).",
                kCounter, s, nodes, nullptr,
                {{nullptr, &N::spill_ghost_hits}});
  AddPerNode<N>(out, "furrballs_spill_errors_total",
                "Failed spill writes and failed or corrupt reloads (the key "
                "is then served from memory or missed, never from a bad "
                "blob).",
                kCounter, s, nodes, nullptr, {{nullptr, &N::spill_errors}});
  AddPerNode<N>(out, "furrballs_spill_keys",
                "Keys whose only copy is in the spill store.", kGauge, s,
                nodes, nullptr, {{nullptr, &N::spill_keys_indexed}});
  AddPerNode<N>(out, "furrballs_spill_disk_bytes",
                "Page-blob bytes the spill store holds for the node.", kGauge,
                s, nodes, nullptr, {{nullptr, &N::spill_disk_bytes}});
  // The compactor (--spill_cold_pages); zero when it is off.
  AddPerNode<N>(out, "furrballs_cold_keys_marked_total",
                "ARC's coldest keys queued to move to COLD pages.", kCounter,
                s, nodes, nullptr, {{nullptr, &N::cold_keys_marked}});
  AddPerNode<N>(out, "furrballs_cold_migrations_total",
                "Keys moved to COLD pages, by the node's worker or by Sets.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::cold_migrations}});
  AddPerNode<N>(out, "furrballs_cold_migrations_by_sets_total",
                "Keys moved to COLD pages by Sets (cooperative migration; "
                "also counted in furrballs_cold_migrations_total).",
                kCounter, s, nodes, nullptr,
                {{nullptr, &N::cold_migrations_cooperative}});
  AddPerNode<N>(out, "furrballs_cold_pages_spilled_total",
                "COLD pages spilled (or, without the spill tier, evicted) "
                "whole.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::cold_pages_spilled}});
  AddPerNode<N>(out, "furrballs_cold_fallbacks_total",
                "Reserve refills that had no COLD page to spill and asked ARC "
                "for victims instead.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::cold_fallbacks}});
  AddPerNode<N>(out, "furrballs_location_cache_lookups_total",
                "Gets under round-robin or thread-local routing by what the "
                "location cache said of the key's node: hit (right), miss "
                "(nothing) or stale (a node that did not hold it); counted "
                "on the requesting thread's node.",
                kCounter, s, nodes, "result",
                {{"hit", &N::location_hits},
                 {"miss", &N::location_misses},
                 {"stale", &N::location_stale}});
  AddPerNode<N>(out, "furrballs_locate_races_total",
                "Searches for a key's node made as a broadcast race (every "
                "node probes at once), on the requesting thread's node.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::races}});
  AddPerNode<N>(out, "furrballs_locate_race_wins_total",
                "Broadcast races this node's probe won (the key was here).",
                kCounter, s, nodes, nullptr, {{nullptr, &N::race_wins}});
  AddPerNode<N>(out, "furrballs_locate_race_fallbacks_total",
                "Broadcast races in which a node's worker refused the probe "
                "(queue full or shutting down) and the caller probed that "
                "node itself.",
                kCounter, s, nodes, nullptr, {{nullptr, &N::race_fallbacks}});
}

void AddDispatch(std::vector<MetricFamily>& out,
                 const std::vector<WorkerCounts>& s) {
  using D = WorkerCounts;
  std::vector<std::string> nodes;
  for (const D& d : s) nodes.push_back(std::to_string(d.node));

  AddPerNode<D>(out, "furrballs_dispatch_batches_total",
                "Batches the node's worker drained from its queue.",
                MetricType::Counter, s, nodes, nullptr, {{nullptr, &D::batches}});
  AddPerNode<D>(out, "furrballs_dispatch_ops_total",
                "Operations the node's worker executed (ops / batches is the "
                "mean batch size).",
                MetricType::Counter, s, nodes, nullptr, {{nullptr, &D::ops}});
  AddPerNode<D>(out, "furrballs_dispatch_merged_writes_total",
                "Writes merged into a later write to the same key in the same "
                "batch (write compaction).",
                MetricType::Counter, s, nodes, nullptr,
                {{nullptr, &D::merged_writes}});
  AddPerNode<D>(out, "furrballs_dispatch_rejected_ops_total",
                "Operations not executed: queue_full = refused because the "
                "node's queue was full, deadline_expired = their deadline "
                "passed while queued.",
                MetricType::Counter, s, nodes, "reason",
                {{"queue_full", &D::rejected_queue_full},
                 {"deadline_expired", &D::deadline_expired}});
  AddPerNode<D>(out, "furrballs_dispatch_queue_depth",
                "Operations waiting in the node's queue.", MetricType::Gauge,
                s, nodes, nullptr, {{nullptr, &D::queue_depth}});
}

// The standard process metrics, named as every Prometheus client library
// names them so that existing dashboards and alerts apply.
void AddProcess(std::vector<MetricFamily>& out) {
  absl::StatusOr<ProcessStats> p = ReadProcessStats();
  if (!p.ok()) return;  // no /proc: leave the families out
  auto add = [&out](const char* name, const char* help, MetricType type,
                    double value) {
    MetricFamily family{name, help, type, {}};
    AddSample(family, {}, value);
    out.push_back(std::move(family));
  };
  add("process_cpu_seconds_total", "Total user and system CPU time spent.",
      MetricType::Counter, p->cpu_seconds);
  add("process_resident_memory_bytes", "Resident memory size.",
      MetricType::Gauge, static_cast<double>(p->resident_bytes));
  add("process_virtual_memory_bytes", "Virtual memory size.",
      MetricType::Gauge, static_cast<double>(p->virtual_bytes));
  add("process_open_fds", "Open file descriptors.", MetricType::Gauge,
      static_cast<double>(p->open_fds));
  add("process_max_fds", "Limit on open file descriptors.", MetricType::Gauge,
      static_cast<double>(p->max_fds));
  add("process_start_time_seconds",
      "Start time of the process since the Unix epoch.", MetricType::Gauge,
      p->start_time_seconds);
}

}  // namespace

StatsCollector::StatsCollector(StatsSources sources)
    : sources_(std::move(sources)) {}

std::vector<MetricFamily> StatsCollector::Collect() const {
  std::vector<MetricFamily> out;
  AddBuildInfo(out);
  if (sources_.requests) AddRequests(out, sources_.requests());
  if (sources_.engine) AddEngine(out, sources_.engine());
  if (sources_.dispatch) AddDispatch(out, sources_.dispatch());
  if (sources_.process) AddProcess(out);
  return out;
}

}  // namespace furrballs::metrics
