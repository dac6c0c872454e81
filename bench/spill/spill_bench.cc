// spill_bench: what the spill tier buys when the working set is larger than
// memory. For each working set (a multiple of the memory budget) and each
// workload (YCSB-B: 95% reads, 5% updates; YCSB-C: reads only; Zipfian
// θ = 0.99 over the keys, 1 KiB values), one cache per mode (--modes: no
// spill tier; ARC victims through the victim batch with whole-page or
// key-only reload; the report's compactor, cold keys on COLD pages spilled
// whole, with either reload) is loaded with every key and then driven
// cache-aside (a Get that misses is followed by a Set of the key, as an
// application would after reading its database). The modes run in the same
// process, one after the other for each cell, --runs times each; every
// number reported is the median over the runs.
//
// Reported per cell: hit ratio, the share of hits served by a reload from
// disk, Get latency p50/p99 for hits from memory and for reloads, and the
// spill write bandwidth while loading and while running. Single-threaded,
// so latencies are the engine's, not queueing. Markdown on stdout.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <absl/flags/flag.h>
#include <absl/flags/parse.h>
#include <absl/strings/numbers.h>
#include <absl/strings/str_split.h>

#include "bench/engine/latency_histogram.h"
#include "bench/engine/ycsb_workload.h"
#include "engine/furrball/furrball.h"

ABSL_FLAG(uint64_t, memory_mb, 32, "Memory budget of the cache.");
ABSL_FLAG(uint64_t, page_kb, 256, "Page size.");
ABSL_FLAG(uint64_t, value_bytes, 1024, "Value size.");
ABSL_FLAG(uint64_t, ops, 300000, "Operations per cell after the load.");
ABSL_FLAG(std::string, multipliers, "1,3,10",
          "Working sets, as multiples of the memory budget.");
ABSL_FLAG(std::string, modes, "off,page,key,cold_page,cold_key",
          "Modes to run: off (no spill tier), page / key (victim batch, "
          "whole-page / key-only reload), cold_page / cold_key "
          "(spill_cold_pages, whole-page / key-only reload).");
ABSL_FLAG(int, runs, 1, "Repetitions of each cell; medians are reported.");
ABSL_FLAG(std::string, workloads, "B,C", "YCSB workloads to run (B, C).");
ABSL_FLAG(std::string, data_dir, "/tmp/furrballs-spill-bench",
          "Scratch directory of the spill store (emptied per cell).");

namespace furrballs {
namespace {

using bench::LatencyHistogram;
using bench::Rng;
using bench::ScrambledZipfianGenerator;
using Clock = std::chrono::steady_clock;

struct Mode {
  const char* flag;
  const char* label;
  bool spill;
  bool whole_page;
  bool cold_pages;
};

constexpr Mode kModes[] = {
    {"off", "off", false, true, false},
    {"page", "victim batch, page reload", true, true, false},
    {"key", "victim batch, key reload", true, false, false},
    {"cold_page", "cold pages, page reload", true, true, true},
    {"cold_key", "cold pages, key reload", true, false, true},
};

struct Cell {
  double multiplier = 0;
  char workload = 'B';
  double hit_ratio = 0;
  double reload_share = 0;  // of hits
  uint64_t mem_p50 = 0, mem_p99 = 0, reload_p50 = 0, reload_p99 = 0;
  double load_write_mbps = 0, run_write_mbps = 0;
  uint64_t reloads = 0, pages_written = 0;
  uint64_t cold_migrations = 0;
};

uint64_t SpillBytes(const FurrBall& ball) {
  uint64_t b = 0;
  for (const NodeStatsSnapshot& s : ball.Stats()) b += s.spill_bytes_written;
  return b;
}

std::string Key(uint64_t i) { return "user" + std::to_string(i); }

Cell RunCell(double multiplier, char workload, const Mode& mode) {
  Cell cell;
  cell.multiplier = multiplier;
  cell.workload = workload;
  const uint64_t memory = absl::GetFlag(FLAGS_memory_mb) << 20;
  const uint64_t value_bytes = absl::GetFlag(FLAGS_value_bytes);
  const uint64_t keys = static_cast<uint64_t>(multiplier * memory / value_bytes);

  FurrBallOptions o;
  o.memory_budget_bytes = memory;
  o.page_size_bytes = absl::GetFlag(FLAGS_page_kb) << 10;
  o.max_value_bytes = 4 * value_bytes;
  o.expected_entry_bytes = value_bytes;
  o.warm_restart = false;
  const std::filesystem::path dir = absl::GetFlag(FLAGS_data_dir);
  if (mode.spill) {
    std::filesystem::remove_all(dir);
    o.spill_dir = dir.string();
    o.spill_disk_budget_bytes = 0;
    o.spill_reload_whole_page = mode.whole_page;
    o.spill_cold_pages = mode.cold_pages;
  }
  absl::StatusOr<std::unique_ptr<FurrBall>> opened = FurrBall::Open(o);
  if (!opened.ok()) {
    std::fprintf(stderr, "open: %s\n", opened.status().ToString().c_str());
    std::exit(1);
  }
  FurrBall& ball = **opened;
  const std::string value(value_bytes, 'v');

  const Clock::time_point load_start = Clock::now();
  for (uint64_t i = 0; i < keys; ++i) ball.Set(Key(i), value);
  const double load_s =
      std::chrono::duration<double>(Clock::now() - load_start).count();
  const uint64_t load_bytes = SpillBytes(ball);
  cell.load_write_mbps = load_bytes / load_s / (1 << 20);

  ScrambledZipfianGenerator zipf(keys, 0.99);
  Rng rng(42);
  LatencyHistogram memory_hits, reload_hits;
  uint64_t gets = 0, hits = 0, reloads = 0;
  std::string got;
  const uint64_t ops = absl::GetFlag(FLAGS_ops);
  const Clock::time_point run_start = Clock::now();
  for (uint64_t op = 0; op < ops; ++op) {
    const std::string key = Key(zipf.Next(rng));
    if (workload == 'B' && rng.NextBelow(100) < 5) {
      ball.Set(key, value);
      continue;
    }
    const Clock::time_point t0 = Clock::now();
    const GetResult g = ball.Get(key, &got);
    const uint64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            Clock::now() - t0)
                            .count();
    ++gets;
    if (!g.found) {
      ball.Set(key, value);  // cache-aside fill
      continue;
    }
    ++hits;
    if (g.reloaded) {
      ++reloads;
      reload_hits.Record(ns);
    } else {
      memory_hits.Record(ns);
    }
  }
  const double run_s =
      std::chrono::duration<double>(Clock::now() - run_start).count();
  cell.run_write_mbps = (SpillBytes(ball) - load_bytes) / run_s / (1 << 20);
  cell.hit_ratio = gets == 0 ? 0 : static_cast<double>(hits) / gets;
  cell.reload_share = hits == 0 ? 0 : static_cast<double>(reloads) / hits;
  cell.mem_p50 = memory_hits.Percentile(0.5);
  cell.mem_p99 = memory_hits.Percentile(0.99);
  cell.reload_p50 = reload_hits.Percentile(0.5);
  cell.reload_p99 = reload_hits.Percentile(0.99);
  cell.reloads = reloads;
  for (const NodeStatsSnapshot& s : ball.Stats()) {
    cell.pages_written += s.spill_pages_written;
    cell.cold_migrations += s.cold_migrations;
  }
  return cell;
}

template <typename T>
T Median(std::vector<Cell>& runs, T Cell::*field) {
  std::sort(runs.begin(), runs.end(), [field](const Cell& a, const Cell& b) {
    return a.*field < b.*field;
  });
  return runs[runs.size() / 2].*field;
}

// The median of every field over the runs, each field on its own (the
// medians may come from different runs).
Cell MedianCell(std::vector<Cell> runs) {
  Cell m = runs[0];
  m.hit_ratio = Median(runs, &Cell::hit_ratio);
  m.reload_share = Median(runs, &Cell::reload_share);
  m.mem_p50 = Median(runs, &Cell::mem_p50);
  m.mem_p99 = Median(runs, &Cell::mem_p99);
  m.reload_p50 = Median(runs, &Cell::reload_p50);
  m.reload_p99 = Median(runs, &Cell::reload_p99);
  m.load_write_mbps = Median(runs, &Cell::load_write_mbps);
  m.run_write_mbps = Median(runs, &Cell::run_write_mbps);
  m.reloads = Median(runs, &Cell::reloads);
  m.pages_written = Median(runs, &Cell::pages_written);
  m.cold_migrations = Median(runs, &Cell::cold_migrations);
  return m;
}

std::string Us(uint64_t ns) {
  if (ns == 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", ns / 1000.0);
  return buf;
}

}  // namespace
}  // namespace furrballs

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using furrballs::Cell;
  std::vector<double> multipliers;
  for (absl::string_view m :
       absl::StrSplit(absl::GetFlag(FLAGS_multipliers), ',')) {
    double v;
    if (!absl::SimpleAtod(m, &v) || v <= 0) {
      std::fprintf(stderr, "bad --multipliers entry\n");
      return 2;
    }
    multipliers.push_back(v);
  }
  std::vector<const furrballs::Mode*> modes;
  for (absl::string_view name :
       absl::StrSplit(absl::GetFlag(FLAGS_modes), ',')) {
    const furrballs::Mode* found = nullptr;
    for (const furrballs::Mode& mode : furrballs::kModes) {
      if (name == mode.flag) found = &mode;
    }
    if (found == nullptr) {
      std::fprintf(stderr, "bad --modes entry\n");
      return 2;
    }
    modes.push_back(found);
  }
  std::vector<char> workloads;
  for (absl::string_view w :
       absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',')) {
    if (w != "B" && w != "C") {
      std::fprintf(stderr, "bad --workloads entry\n");
      return 2;
    }
    workloads.push_back(w[0]);
  }
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  std::printf(
      "memory %llu MiB, pages %llu KiB, values %llu B, %llu ops per cell, "
      "Zipfian 0.99, cache-aside fill on miss, 1 thread, median of %d "
      "run(s)\n\n",
      (unsigned long long)absl::GetFlag(FLAGS_memory_mb),
      (unsigned long long)absl::GetFlag(FLAGS_page_kb),
      (unsigned long long)absl::GetFlag(FLAGS_value_bytes),
      (unsigned long long)absl::GetFlag(FLAGS_ops), runs);
  std::printf(
      "| working set | YCSB | spill | hit ratio | hits by reload | memory hit "
      "p50/p99 µs | reload p50/p99 µs | spill write MiB/s load / run | pages "
      "spilled | reloads | cold migrations |\n"
      "|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (double m : multipliers) {
    for (char w : workloads) {
      for (const furrballs::Mode* mode : modes) {
        std::vector<Cell> cells;
        for (int r = 0; r < runs; ++r) {
          cells.push_back(furrballs::RunCell(m, w, *mode));
        }
        const Cell c = furrballs::MedianCell(std::move(cells));
        std::printf(
            "| %gx | %c | %s | %.3f | %.3f | %s / %s | %s / %s | %.1f / %.1f "
            "| %llu | %llu | %llu |\n",
            c.multiplier, c.workload, mode->label, c.hit_ratio,
            c.reload_share, furrballs::Us(c.mem_p50).c_str(),
            furrballs::Us(c.mem_p99).c_str(),
            furrballs::Us(c.reload_p50).c_str(),
            furrballs::Us(c.reload_p99).c_str(), c.load_write_mbps,
            c.run_write_mbps, (unsigned long long)c.pages_written,
            (unsigned long long)c.reloads,
            (unsigned long long)c.cold_migrations);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
