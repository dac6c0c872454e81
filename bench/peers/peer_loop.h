// bench/peers/peer_loop.h: load a server and run one benchmark cell against
// it through PeerClients, closed loop or open loop.
//
// Thread safety: LoadRecords and RunPeerCell start and join their own threads
// (one PeerClient each, made by the factory on that thread); call them from
// one thread.
//
// Method:
// - Keys are bench/engine's FormatKey ("user" + zero-padded number,
//   key_bytes long), chosen by its KeyChooser (scrambled Zipfian or uniform
//   over `records`). Every value carries its key number in its first eight
//   bytes; a read that returns another size or number counts as a bad value.
// - An operation is a read, an update (a write of the whole value) or, in
//   workload F, a read-modify-write: read, re-stamp, write back (one
//   operation, latency from the read's start to the write's answer, like
//   YCSB's READ-MODIFY-WRITE). A read that misses is followed by a fill write
//   (a cache in front of a database); fills are not operations and their
//   latency is not recorded, but their time is inside the run.
// - Depth d: each thread sends d operations at once (PeerClient::Execute), then
//   the writes that depend on them (fills, the write half of F) as a second
//   batch. Every operation's latency runs from the batch's start to its own
//   answer.
// - Closed loop (target_ops_per_second = 0): each thread sends its next batch
//   when the last one is answered.
// - Open loop (target_ops_per_second > 0, depth 1): each thread has a
//   schedule of intended send times at target / threads per second. A late
//   thread sends at once, and latency is measured from the intended time, so
//   queueing behind a slow answer is counted (no coordinated omission).
// - Warm-up: operations that start in the first warmup_seconds are run but
//   not measured. Throughput is the measured operations over the time from
//   the end of the warm-up to the last measured answer.
#ifndef FURRBALLS_BENCH_PEERS_PEER_LOOP_H_
#define FURRBALLS_BENCH_PEERS_PEER_LOOP_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <absl/status/statusor.h>

#include "bench/engine/latency_histogram.h"
#include "bench/engine/ycsb_workload.h"
#include "bench/peers/peer_client.h"

namespace furrballs::bench::peers {

using ClientFactory = std::function<absl::StatusOr<std::unique_ptr<PeerClient>>()>;

struct PeerCellSpec {
  WorkloadMix workload;
  Distribution distribution = Distribution::kZipfian;
  uint64_t records = 100000;
  size_t key_bytes = 24;
  size_t value_bytes = 64;
  int threads = 4;
  int depth = 1;
  // 0: closed loop. > 0: open loop at this many operations per second in all.
  double target_ops_per_second = 0;
  double seconds = 5;
  double warmup_seconds = 1;
  // Closed loop: each thread keeps going past `seconds` until it has
  // measured at least this many batches (a thread descheduled through the
  // whole window would otherwise measure nothing). Tests set it; benchmarks
  // leave it 0.
  uint64_t min_measured_batches = 0;
  double zipf_theta = 0.99;
  uint64_t seed = 1;
};

struct PeerCellResult {
  uint64_t ops = 0;  // measured operations
  // Every operation run, warm-up included: what the server did over the
  // whole cell, the denominator of its CPU per operation.
  uint64_t executed_ops = 0;
  double seconds = 0;
  double ops_per_second = 0;
  uint64_t reads = 0;      // reads, including the read half of F
  uint64_t read_hits = 0;
  uint64_t fills = 0;
  uint64_t failed = 0;     // operations the server or connection failed
  uint64_t bad_values = 0;
  LatencyHistogram read_latency;
  LatencyHistogram update_latency;
  LatencyHistogram rmw_latency;

  double HitRatio() const {
    return reads == 0 ? 0.0 : static_cast<double>(read_hits) / static_cast<double>(reads);
  }
};

// Writes records first_record .. first_record+records-1 once, from `threads`
// threads in batches of `depth`. Returns the number of writes that failed, or
// the first connection error.
absl::StatusOr<uint64_t> LoadRecords(const ClientFactory& factory, uint64_t first_record,
                                     uint64_t records, size_t key_bytes,
                                     size_t value_bytes, int threads, int depth);

absl::StatusOr<PeerCellResult> RunPeerCell(const ClientFactory& factory,
                                           const PeerCellSpec& spec);

// Writes the key number into the first bytes of *value (its size unchanged),
// and a version after it when there is room.
void StampValue(uint64_t key_number, uint64_t version, std::string* value);
// True if `value` is value_bytes long and stamped with key_number.
bool ValueMatches(const std::string& value, uint64_t key_number, size_t value_bytes);

}  // namespace furrballs::bench::peers

#endif  // FURRBALLS_BENCH_PEERS_PEER_LOOP_H_
