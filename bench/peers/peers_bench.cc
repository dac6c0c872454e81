// bench/peers/peers_bench.cc: the peers driver. Loads running servers and
// runs a list of cells against them, printing one JSON object per
// (round, cell, target) line to --out and a progress line per run to stderr.
// Targets are interleaved inside every cell (all systems run cell 1, then all
// run cell 2, ...) so that drift in a shared machine's load hits them alike.
// bench/peers/run.py starts the servers and calls this; see
// docs/peers_bench.md.
//
//   peers_bench --targets=redis@127.0.0.1:6379@4242,memcached@127.0.0.1:11211
//     --value_bytes=64 --records=150000 --cells=A:zipfian:1:0,B:zipfian:1:20000
//
// A target is backend@host:port[@server pid] (the pid's VmRSS is reported,
// and its CPU per operation of each cell).
// A cell is workload:distribution:depth:rate — workload A, B, C, F (YCSB) or
// S (writes only, for the redis-benchmark check); distribution zipfian or
// uniform; depth 1 or more; rate 0 for the closed loop, else the open loop's
// operations per second.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_cat.h>
#include <absl/strings/str_format.h>
#include <absl/strings/str_split.h>

#include "bench/engine/ycsb_runner.h"
#include "bench/peers/peer_client.h"
#include "bench/peers/peer_loop.h"

ABSL_FLAG(std::string, targets, "furrballs@127.0.0.1:50051",
          "Comma-separated backend@host:port[@pid]; backends: furrballs, "
          "furrballs_batched, furrballs_pipeline, furrballs_multi, "
          "furrballs_shared, redis, memcached.");
ABSL_FLAG(int, rounds, 1, "Times the whole cell list is run.");
ABSL_FLAG(uint64_t, records, 150000, "Records (keys) in the data set.");
ABSL_FLAG(uint64_t, key_bytes, 24, "Key length.");
ABSL_FLAG(uint64_t, value_bytes, 64, "Value length.");
ABSL_FLAG(int, threads, 4, "Client threads, one connection each.");
ABSL_FLAG(bool, load, true,
          "Load every record into each server (through the first target that "
          "names its address) before the cells.");
ABSL_FLAG(std::string, cells, "A:zipfian:1:0", "Comma-separated cells (see the file comment).");
ABSL_FLAG(double, seconds, 5, "Measured seconds per cell.");
ABSL_FLAG(double, warmup_seconds, 1, "Unmeasured seconds before each cell.");
ABSL_FLAG(double, zipf_theta, 0.99, "Zipfian constant.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the key and operation choices.");
ABSL_FLAG(std::string, out, "", "Append JSON lines here (default: stdout).");

namespace furrballs::bench::peers {
namespace {

struct Target {
  std::string backend;
  std::string address;
  int pid = 0;
};

absl::StatusOr<Target> ParseTarget(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, '@');
  Target t;
  if (parts.size() < 2 || parts.size() > 3 ||
      (parts.size() == 3 && !absl::SimpleAtoi(parts[2], &t.pid))) {
    return absl::InvalidArgumentError(
        absl::StrCat("target '", text, "' is not backend@host:port[@pid]"));
  }
  t.backend = parts[0];
  t.address = parts[1];
  return t;
}

struct CellText {
  std::string text;
  PeerCellSpec spec;
};

absl::StatusOr<CellText> ParseCell(const std::string& text) {
  std::vector<std::string> parts = absl::StrSplit(text, ':');
  if (parts.size() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("cell '", text, "' is not workload:distribution:depth:rate"));
  }
  CellText cell{text, {}};
  if (parts[0] == "S" || parts[0] == "s") {
    cell.spec.workload = WorkloadMix{'S', 0.0, false};
  } else {
    absl::StatusOr<WorkloadMix> mix = ParseWorkload(parts[0]);
    if (!mix.ok()) return mix.status();
    cell.spec.workload = *mix;
  }
  absl::StatusOr<Distribution> d = ParseDistribution(parts[1]);
  if (!d.ok()) return d.status();
  cell.spec.distribution = *d;
  if (!absl::SimpleAtoi(parts[2], &cell.spec.depth) || cell.spec.depth < 1 ||
      !absl::SimpleAtod(parts[3], &cell.spec.target_ops_per_second)) {
    return absl::InvalidArgumentError(absl::StrCat("cell '", text, "': bad depth or rate"));
  }
  return cell;
}

std::string LatencyJson(const char* name, const LatencyHistogram& h) {
  return absl::StrFormat(
      "\"%s_count\":%d,\"%s_p50_us\":%.2f,\"%s_p99_us\":%.2f,\"%s_p999_us\":%.2f", name,
      h.count(), name, h.Percentile(0.5) / 1e3, name, h.Percentile(0.99) / 1e3, name,
      h.Percentile(0.999) / 1e3);
}

int Main() {
  std::vector<CellText> cells;
  const std::vector<std::string> cell_texts =
      absl::StrSplit(absl::GetFlag(FLAGS_cells), ',', absl::SkipEmpty());
  for (const std::string& text : cell_texts) {
    absl::StatusOr<CellText> cell = ParseCell(text);
    if (!cell.ok()) {
      std::fprintf(stderr, "peers_bench: %s\n", std::string(cell.status().message()).c_str());
      return 2;
    }
    cell->spec.records = absl::GetFlag(FLAGS_records);
    cell->spec.key_bytes = absl::GetFlag(FLAGS_key_bytes);
    cell->spec.value_bytes = absl::GetFlag(FLAGS_value_bytes);
    cell->spec.threads = absl::GetFlag(FLAGS_threads);
    cell->spec.seconds = absl::GetFlag(FLAGS_seconds);
    cell->spec.warmup_seconds = absl::GetFlag(FLAGS_warmup_seconds);
    cell->spec.zipf_theta = absl::GetFlag(FLAGS_zipf_theta);
    cell->spec.seed = absl::GetFlag(FLAGS_seed);
    cells.push_back(*std::move(cell));
  }
  std::vector<Target> targets;
  const std::vector<std::string> target_texts =
      absl::StrSplit(absl::GetFlag(FLAGS_targets), ',', absl::SkipEmpty());
  for (const std::string& text : target_texts) {
    absl::StatusOr<Target> t = ParseTarget(text);
    if (!t.ok()) {
      std::fprintf(stderr, "peers_bench: %s\n", std::string(t.status().message()).c_str());
      return 2;
    }
    targets.push_back(*t);
  }
  if (targets.empty()) {
    std::fprintf(stderr, "peers_bench: --targets is empty\n");
    return 2;
  }
  const std::string out_path = absl::GetFlag(FLAGS_out);
  std::FILE* out = out_path.empty() ? stdout : std::fopen(out_path.c_str(), "a");
  if (out == nullptr) {
    std::fprintf(stderr, "peers_bench: cannot open %s\n", out_path.c_str());
    return 1;
  }

  if (absl::GetFlag(FLAGS_load)) {
    std::vector<std::string> loaded;
    for (const Target& target : targets) {
      if (std::find(loaded.begin(), loaded.end(), target.address) != loaded.end()) continue;
      loaded.push_back(target.address);
      const uint64_t start = NowNs();
      absl::StatusOr<uint64_t> failed = LoadRecords(
          [&] { return MakePeerClient(target.backend, target.address); }, 0,
          absl::GetFlag(FLAGS_records), absl::GetFlag(FLAGS_key_bytes),
          absl::GetFlag(FLAGS_value_bytes), absl::GetFlag(FLAGS_threads), 16);
      if (!failed.ok()) {
        std::fprintf(stderr, "peers_bench: load %s: %s\n", target.address.c_str(),
                     std::string(failed.status().message()).c_str());
        return 1;
      }
      std::fprintf(stderr,
                   "peers_bench: loaded %llu records into %s via %s in %.1f s "
                   "(%llu failed)\n",
                   static_cast<unsigned long long>(absl::GetFlag(FLAGS_records)),
                   target.address.c_str(), target.backend.c_str(),
                   (NowNs() - start) * 1e-9, static_cast<unsigned long long>(*failed));
    }
  }

  const int rounds = absl::GetFlag(FLAGS_rounds);
  for (int round = 0; round < rounds; ++round) {
    for (const CellText& cell : cells) {
      for (const Target& target : targets) {
        const double cpu_before = target.pid > 0 ? ReadCpuSeconds(target.pid) : -1;
        absl::StatusOr<PeerCellResult> r = RunPeerCell(
            [&] { return MakePeerClient(target.backend, target.address); }, cell.spec);
        const double cpu_after = target.pid > 0 ? ReadCpuSeconds(target.pid) : -1;
        if (!r.ok()) {
          std::fprintf(stderr, "peers_bench: %s %s: %s\n", target.backend.c_str(),
                       cell.text.c_str(), std::string(r.status().message()).c_str());
          return 1;
        }
        const PeerCellSpec& s = cell.spec;
        // The server's CPU over the whole cell (warm-up included) per
        // operation run in it: the steadiest figure on a shared machine.
        const double cpu_us_per_op =
            cpu_before >= 0 && cpu_after >= 0 && r->executed_ops > 0
                ? (cpu_after - cpu_before) * 1e6 / static_cast<double>(r->executed_ops)
                : -1;
        const std::string line = absl::StrCat(
            "{",
            absl::StrFormat(
                "\"backend\":\"%s\",\"round\":%d,\"workload\":\"%c\","
                "\"distribution\":\"%s\",\"depth\":%d,\"loop\":\"%s\","
                "\"target_ops_per_second\":%.0f,\"value_bytes\":%d,\"key_bytes\":%d,"
                "\"records\":%d,\"threads\":%d,",
                target.backend, round, s.workload.name, DistributionName(s.distribution),
                s.depth, s.target_ops_per_second > 0 ? "open" : "closed",
                s.target_ops_per_second, s.value_bytes, s.key_bytes, s.records,
                s.threads),
            absl::StrFormat(
                "\"ops\":%d,\"seconds\":%.3f,\"ops_per_second\":%.1f,\"reads\":%d,"
                "\"read_hits\":%d,\"hit_ratio\":%.5f,\"fills\":%d,\"failed\":%d,"
                "\"bad_values\":%d,\"server_rss_bytes\":%d,"
                "\"server_cpu_us_per_op\":%.3f,",
                r->ops, r->seconds, r->ops_per_second, r->reads, r->read_hits,
                r->HitRatio(), r->fills, r->failed, r->bad_values,
                target.pid > 0 ? ReadRssBytes(target.pid) : -1, cpu_us_per_op),
            LatencyJson("read", r->read_latency), ",",
            LatencyJson("update", r->update_latency), ",",
            LatencyJson("rmw", r->rmw_latency), "}\n");
        std::fputs(line.c_str(), out);
        std::fflush(out);
        std::fprintf(stderr,
                     "peers_bench: %-18s %-20s %9.0f ops/s  server %.2f us/op  read p50 "
                     "%.1f us p99 %.1f us  hit %.3f  failed %llu\n",
                     target.backend.c_str(), cell.text.c_str(), r->ops_per_second,
                     cpu_us_per_op,
                     r->read_latency.Percentile(0.5) / 1e3,
                     r->read_latency.Percentile(0.99) / 1e3, r->HitRatio(),
                     static_cast<unsigned long long>(r->failed));
      }
    }
  }
  if (out != stdout) std::fclose(out);
  return 0;
}

}  // namespace
}  // namespace furrballs::bench::peers

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return furrballs::bench::peers::Main();
}
