// engine/furrball/register_history.h: a history of operations on ONE key of
// a cache and a checker that decides whether it is linearizable (tests).
//
// Thread safety: RegisterHistory is thread-safe (Tick is an atomic, Add
// takes a mutex); CheckRegisterHistory is a pure function.
//
// ---------------------------------------------------------------------------
// The model
//
// The key is a register that is absent or holds (value, version). Ops:
//   Set(v) -> version    the register holds (v, version) afterwards
//   Get -> (v, version)  the register held it; Get -> miss: it was absent
//   Delete -> deleted    true: it held something and is absent afterwards;
//                        false: it was absent
//   expiry               no op: a value written with a TTL may become absent
//                        once the clock has reached its deadline
// The register starts absent. Every Set writes a value no other Set writes,
// so a read names the one Set it saw. Versions are the cache's promise: each
// Set's version is above every earlier Set's (in linearization order), so the
// order of the writes is given, the Sets sorted by version: w_1 < w_2 < ...
// The state of the register is therefore one of
//   (0, absent) < (1, present) < (1, absent) < (2, present) < ...
// and it only moves forward: epoch k starts with w_k, may end its present
// phase with a removal (a Delete that returns true, or expiry) and its
// absent phase with w_k+1.
//
// Every op x carries invoke(x) < respond(x), ticks of one shared atomic
// counter taken just before the call and just after it returned; a
// linearization gives x a point in between. The clock (a ManualClock) is
// advanced only by recorded AdvanceClock ops, so the clock a Set read lies
// between the value before the last advance that had not returned at the
// Set's invoke and the value after the Set's respond.
//
// ---------------------------------------------------------------------------
// The rules (each names the kind of violation reported)
//
// R1 kNeverWritten: a Get returns a value no Set wrote, or with another
//    version than the Set that wrote it returned. Necessary: a read returns
//    a state the register held. Also a Get of a value whose Set was invoked
//    after the Get returned (kNeverWritten: not written yet).
// R2 kVersionBackwards: two Sets share a version, or Set a returned before
//    Set b was invoked and version(a) >= version(b). Necessary: a precedes b
//    in every linearization, and versions increase with it.
// R3 kLostWrite: a Get returns w_i although it was invoked after some w_j
//    with j > i had returned. Necessary: w_j precedes the Get, so the state
//    the Get sees is at or past epoch j, and w_i never comes back.
// R4 kStaleRead: a Get of w_i invoked after another op that saw a later
//    state returned: a Get of w_j with j > i, or a miss or Delete invoked
//    after w_i returned (it saw or made the state absent, after w_i).
//    Necessary for the same reason as R3: states only move forward.
// R5 kUnexplainedMiss: a miss (a Get miss or a Delete that returns false)
//    whose latest preceding Set w (the one of highest version among those
//    that returned before the miss was invoked) can be followed by no
//    removal before the miss: no Delete returning true with
//    invoke < respond(miss) and respond > invoke(w), and no expiry of w or a
//    later Set invoked before respond(miss) whose earliest deadline the clock
//    reached before respond(miss). Necessary: the state at the miss is
//    absent and at or after epoch(w), so some removal lies in between.
// R6 kNotLinearizable: the exact check. R1-R5 are pairwise and give a short
//    explanation; what they do not decide (one Delete that would have to
//    explain two misses on either side of a later write; two Deletes that
//    both removed the value of one Set) is decided by a search over the
//    states above, in invoke/respond order: at each respond, the set of
//    (state, which open ops are linearized) that some linearization of the
//    prefix reaches (Lowe's just-in-time linearization); expiry is a
//    transition of the present state allowed once the sweep has passed the
//    earliest tick of R5. It is sufficient and necessary by construction: a
//    linearization exists iff the set is never empty. It is polynomial in
//    the number of ops for a bounded number of threads: because the versions
//    fix the order of writes, a state is (epoch, present) and only the
//    epochs of open Sets are reachable, so the set has at most
//    (2 * open + 2) * 2^open members (open <= threads, at most 64).
//
// R1-R5 never fire on a linearizable history (each is necessary), so the
// first rule that fires is the explanation; R6 is reached only when all
// pass and decides.
//
// What the model cannot see: a Set's deadline is known only up to the
// clock advances its interval overlaps, so expiry is allowed from the
// earliest deadline possible; an entry that expired less than that
// uncertainty early passes.
#ifndef FURRBALLS_ENGINE_FURRBALL_REGISTER_HISTORY_H_
#define FURRBALLS_ENGINE_FURRBALL_REGISTER_HISTORY_H_

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace furrballs {

struct RegisterOp {
  enum class Kind { kSet, kGet, kDelete, kAdvanceClock };
  Kind kind = Kind::kGet;
  int thread = 0;        // who ran it, for the explanation
  uint64_t invoke = 0;   // RegisterHistory::Tick() just before the call
  uint64_t respond = 0;  // and just after it returned
  std::string value;     // kSet: written; kGet with found: read
  uint64_t version = 0;  // kSet: returned; kGet with found: read
  bool found = false;    // kGet: a hit; kDelete: deleted
  uint64_t ttl_ms = 0;   // kSet: 0 = never expires
  uint64_t clock_ms = 0;  // kAdvanceClock: the clock's value afterwards
};

class RegisterHistory {
 public:
  // The ticks every op's invoke and respond are taken from. Sequentially
  // consistent: the ticks order the ops' effects as the threads saw them.
  uint64_t Tick() { return ticks_.fetch_add(1, std::memory_order_seq_cst) + 1; }
  // Takes `op`'s invoke tick, runs `call(op)` (which fills in what the
  // operation returned), takes its respond tick and adds it.
  template <typename Call>
  void Record(RegisterOp op, Call&& call) {
    op.invoke = Tick();
    call(op);
    op.respond = Tick();
    Add(op);
  }
  void Add(const RegisterOp& op) {
    std::lock_guard<std::mutex> l(mu_);
    ops_.push_back(op);
  }
  std::vector<RegisterOp> ops() const {
    std::lock_guard<std::mutex> l(mu_);
    return ops_;
  }

 private:
  std::atomic<uint64_t> ticks_{0};
  mutable std::mutex mu_;
  std::vector<RegisterOp> ops_;
};

struct RegisterCheck {
  enum class Violation {
    kNone,
    kMalformed,  // the history breaks the model (e.g. a value written twice)
    kNeverWritten,
    kVersionBackwards,
    kLostWrite,
    kStaleRead,
    kUnexplainedMiss,
    kNotLinearizable,
  };
  Violation violation = Violation::kNone;
  // The ops involved and why, one per line; empty when linearizable.
  std::string explanation;
  bool ok() const { return violation == Violation::kNone; }
};

const char* ViolationName(RegisterCheck::Violation v);
std::string DescribeOp(const RegisterOp& op);

// `initial_clock_ms`: the ManualClock's value before the first op.
RegisterCheck CheckRegisterHistory(const std::vector<RegisterOp>& ops,
                                   uint64_t initial_clock_ms);

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_FURRBALL_REGISTER_HISTORY_H_
