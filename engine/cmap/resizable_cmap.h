// engine/cmap/resizable_cmap.h: ResizableCMap, a CMap (cmap.h) that grows,
// and shrinks, with an incremental rehash, keeping CMap's lock-free readers
// and lock-free in-place writers (issue 13: the key table follows the keys,
// and gives its memory back when the values grow).
//
// Thread safety: Find, TryVisit and UpdateInPlace are lock-free and may run
// concurrently with everything. Set, FindAndEraseByHash, BeginGrow,
// BeginShrink and MigrateSome REQUIRE the caller's external write lock (ConcurrentARC's
// SpinLock), as CMap's key set does under ConcurrentARC today. AllocateTable
// and ReleaseRetired are called WITHOUT that lock (they map and release
// memory) and are safe against everything else; ReleaseRetired against
// itself too.
//
// ---------------------------------------------------------------------------
// Design
// ---------------------------------------------------------------------------
//
// One CMap, or two while growing: the old table A and the new table B
// (AllocateTable, BeginGrow). A shrink is the same migration toward a B
// smaller than A (BeginShrink; B must admit every key A holds): nothing
// below depends on which of the two is bigger, except claim (e), which
// says why B never refuses a key. "Growing" below means either. MigrateSome moves a bounded number of keys from
// A to B per call, under the external lock, so no lock hold is long (at 64
// keys a few microseconds); when A is empty it is retired and B is the only
// table. ReleaseRetired then gives A's pages back; A's memory is deallocated
// only by the destructor, because readers may still be probing it.
//
// Table keys. A CMap slot keeps only h2 (its fingerprint), and the migrator
// must re-place a key in B from what its slot in A holds. So the tables are
// keyed by TableKey(h) = {h.h2, h.h2}: the home group comes from h2's low 32
// bits, the control byte from its top 7 bits, the fingerprint is h2 whole.
// The cost: two keys with the same h2 are one key here whatever their h1
// (a plain CMap confuses them only if their probe paths also overlap); with
// the keyed 128-bit hash that is a 2^-64 chance per pair, and the engine
// compares the full key on every hit (issue 13, goal 5).
//
// ---------------------------------------------------------------------------
// Concurrency protocol
// ---------------------------------------------------------------------------
//
// State: epoch_ (uint64_t; odd while a writer switches tables), old_ (A or
// null), current_ (B while growing, else the only table). Tables are never
// deallocated while the ResizableCMap lives, so every pointer a reader ever
// loads stays valid to probe.
//
// Switches (under the external lock; each a seqlock write of the pair):
//
//   BeginGrow(B)  epoch_ store odd (relaxed); release fence; old_ store the
//                 current table (relaxed); current_ store B (release: B's
//                 construction is visible to a reader that loads it);
//                 epoch_ store even (release).
//   Retire        (MigrateSome, once A holds no key) the same with old_
//                 store null; A joins the tables ReleaseRetired releases.
//
// Inserts and erases (under the external lock, so they never race the
// migrator or each other):
//
//   Set           growing: if A holds the key, update it there (under its
//                 slot lock, as UpdateInPlace); else if B holds it, update
//                 it in B; else insert into B if A + B hold fewer than
//                 capacity() keys (kCacheFull otherwise). Not growing:
//                 CMap::Set on the one table. Inserts go only to B.
//   Erase         where the key is: A first, then B.
//   Move          (MigrateSome) CMap::MoveSomeTo: under A's slot lock,
//                 insert K into B, release fence, erase K from A, unlock
//                 (cmap.h, "Move K out").
//
// A key is therefore in exactly one table, except during its move, when it
// is in both and A's copy is locked (odd seq) until it is erased.
//
// Readers (Find, TryVisit) and UpdateInPlace, one round:
//
//   1. e = epoch_ load (acquire); a = old_, b = current_ loads (acquire).
//   2. If a: probe a (one validated CMap probe). Hit: done.
//      Acquire fence.
//   3. Probe b. Hit: done.
//   4. Miss: acquire fence; if e is even and epoch_ load (relaxed) == e,
//      the key is absent; else go round again from 1 (after a pause, then
//      yielding, as CMap's readers do while a writer is inside a slot: a
//      writer preempted mid-switch holds the external lock).
//
// Claims, and why they hold:
//
//   (a) A hit is never wrong. Every hit is CMap's validated read of one
//       stable slot state (the slot seqlock), so the value was the key's
//       at that instant, in whichever table; tables are never unmapped, and
//       a released one is never a hit (see "Released tables").
//   (b) No miss window while a key moves. Suppose K is in A when the probe
//       of A starts, and the probe misses it. Then some load of the probe
//       read a store of K's move-out (its DELETED control byte, fingerprint
//       0, changed seq or its overflow decrement): nothing else removes K
//       from A while growing, and EMPTY bytes are never written. All those
//       stores follow the release fence after B's insert of K, and the
//       reader's acquire fence in step 2 follows that load: the fences
//       synchronize, so B's insert happens before the probe of B, which
//       finds K (or a later value of it). If the slot was locked mid-move,
//       the reader's R1 waits for the Unlock, whose release store it then
//       reads, with the same result.
//   (c) A stale pair of pointers only causes a retry. The pointer loads of
//       step 1 lie between two loads of the same even epoch, with the
//       writer's release fence after its odd store and the reader's acquire
//       fence before its re-check: as in any seqlock, if either load read a
//       store of a switch, the re-check sees that switch's epoch. So when
//       step 4 reports a miss, (a, b) was exactly the state of epoch e. A
//       key present for the whole read, in that state, is in a or b, except
//       if a switch after e moved it: a migration out of b needs a later
//       BeginGrow (b becomes the old table), whose epoch store precedes, in
//       the lock's order, the release fence of every move-out; a probe
//       that read one of the move's stores is followed by the acquire fence
//       of step 4, so its epoch load sees the later epoch and goes round.
//       Only misses pay for this: one fence (free on x86) and one load.
//   (d) UpdateInPlace updates exactly one copy. CMap::UpdateInPlace runs fn
//       at most once and only under a slot lock that held K. In A it either
//       gets the lock before the migrator (the move then copies fn's
//       result) or fails: kKeyNotFound (K gone) or kAbandonedSet (the slot
//       held, perhaps by the migrator mid-move, or K erased since the probe).
//       Either way it tries B: if B has K, A's copy is locked or gone, so
//       updating B's is updating the key. If B lacks K too, A's
//       kAbandonedSet is returned (nothing changed; retry), and a miss is
//       checked as in step 4.
//   (e) Growth never admits more than capacity() keys: while growing an
//       insert is admitted against A's and B's live counts together, and B
//       admits every key the migrator moves into it: |A| + |B| <= cap(B)
//       holds at BeginGrow (B is bigger than A) and at BeginShrink (which
//       refuses a B smaller than |A|), inserts keep it (they are admitted
//       against the sum), erases and moves do not raise the sum; so a moved
//       key finds |B| < |A| + |B| <= cap(B). For a shrink this is the whole
//       difference: the migrator can never meet a full B.
//   (f) Releasing A's slots behind the cursor hides no key (below).
//
// Released behind the cursor (issue 13: a growth's peak should be the new
// table plus what of the old one is still in use, not both whole).
// MigrateSome walks A by slot position, from slot 0 up, so A's slots empty
// in address order. Which pages may go, when, and by whom:
//
//   which  The whole pages of A's slots below group clear_groups_, the
//          groups wholly behind the cursor. Every slot there holds no key:
//          the cursor passes a slot only after moving its key out or
//          finding it free under the slot lock (CMap::MoveSomeTo stops at a
//          slot it cannot take), and while growing no key enters A (inserts
//          go to B), so none ever will again. A's control bytes and
//          overflow counts are NOT released (1 byte and 1/4 byte per slot
//          against the slot's 32 for KeyMeta; they go with A when it is
//          retired), which is what makes this safe without asking whether
//          a key still in A has a probe path through a released group: the
//          probe walks control bytes and overflow counts, which keep their
//          values, and a key's own slot is never below the cursor.
//          (Releasing control bytes too would need that question, answered
//          by groups whose overflow counts are 0: a displaced key's home
//          group read as EMPTY would end its probe before its slot.)
//   when   MigrateSome advances clear_groups_ under the external lock and
//          publishes it with the table (retired_mu_); ReleaseRetired,
//          WITHOUT the external lock (madvise may take mmap_lock, and a
//          writer spinning on the SpinLock must never wait for it),
//          releases the published prefix in batches of min_batch_bytes.
//          ConcurrentARC calls it after every growth step, whichever
//          thread ran the step. Releasers are serialized by release_mu_,
//          which remembers how much of A went this way, so that A's release
//          when it is retired counts only the rest.
//
// Why a reader racing the release never misses a key present, and never
// takes a zeroed slot for a match:
//
//   - It reads the same control bytes and overflow counts as without the
//     release, so it visits the same candidate slots. A key present in A
//     is in a slot at or above the cursor, never released; a key in B is
//     untouched. Claims (a)-(c) hold as before.
//   - A candidate in a released slot is a stale match (the slot's key
//     moved out since, or the control byte was a hash collision): it reads
//     fingerprint 0, which R2 rejects for every key whose h2 is not 0, or,
//     if it was inside R1..R4 when the page was zeroed, seq 0 at R4, and
//     a slot that held a key was written and a written slot's seq never
//     returns to 0 (slot.h, Unlock skips it), so R4 != R1 and it retries.
//     A key whose h2 is 0 matches the zeroed fingerprint but still needs a
//     control byte equal to H2Short(0) = 0 at that slot and an unchanged
//     seq: the control byte there is DELETED (or was read stale), so R2
//     fails on the control byte it re-reads inside the window.
//   - A stale UpdateInPlace can lock a released slot whose control byte
//     and fingerprint it matched before the move (it re-checks both under
//     the lock, finds DELETED and unlocks): it writes the seq word, which
//     re-faults one page. That page holds no key; the write may be lost to
//     a concurrent madvise, leaving seq 0, which is an unlocked empty slot
//     to every later reader and writer.
//
// resizable_cmap_test's ReleasingBehindTheCursorNeverHidesAKey releases
// after every migration step and looks up every key; releasing ahead of
// the cursor (a page that still holds keys) fails it at once, and
// resizable_cmap_stress_test releases while readers run.
//
// Released tables. ReleaseRetired gives a retired table's pages back with
// RawAllocator::Release (madvise(MADV_DONTNEED) for Numatic's mappings):
// they then read as zeros. Zero is an empty table in every field (control
// bytes are stored XOR 0x80, so EMPTY is zero; overflow counts 0; seq 0), and
// a retired table already held no key, its overflow counts back at 0, so a
// probe that reads any mix of old and zeroed pages finds nothing and stops at
// the first group. The one hazard is a reader inside CMap's R1..R4 on a slot
// that held a key before the move: with the page zeroed under it, its R3
// could read zero value words and its R4 a zero seq word. That is never
// accepted: the slot was written (the key's insert), and a written slot's
// sequence is never 0 (slot.h, Unlock skips it), so R4 differs from R1 and
// the reader retries, then finds the slot empty. (The release is not a C++
// store; this rests on the kernel, whose TLB shootdown completes before
// madvise returns, so a load that sees a zeroed page follows every store
// made before the release, the move-outs included.) A stale UpdateInPlace
// can still lock a zeroed slot whose fingerprint it matched, only for a key
// whose h2 is 0; it finds no key and unlocks, which re-faults one page.
#ifndef FURRBALLS_ENGINE_CMAP_RESIZABLE_CMAP_H_
#define FURRBALLS_ENGINE_CMAP_RESIZABLE_CMAP_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include <absl/base/attributes.h>
#include <absl/base/thread_annotations.h>

#include "engine/cmap/cmap.h"
#include "engine/cmap/internal/slot.h"
#include "engine/common/error.h"
#include "engine/common/hash_pair.h"
#include "engine/common/raw_allocator.h"
#include "engine/common/sync.h"

namespace furrballs {

namespace cmap_internal {
class CMapTestPeer;
}  // namespace cmap_internal

template <typename Value>
class ResizableCMap {
 public:
  using Table = CMap<Value>;
  using VisitOutcome = typename Table::VisitOutcome;

  // A table for `capacity` keys, as CMap's constructor. Check status().
  ResizableCMap(size_t capacity, RawAllocator alloc,
                KeyHasher hasher = KeyHasher())
      : current_owned_(AllocateTable(capacity, alloc, hasher)) {
    status_ = current_owned_->status();
    current_.store(current_owned_.get(), std::memory_order_relaxed);
  }
  ~ResizableCMap() = default;

  ResizableCMap(const ResizableCMap&) = delete;
  ResizableCMap& operator=(const ResizableCMap&) = delete;

  // The first table's construction status, as CMap::status(); an inert map
  // misses every lookup and refuses every Set with it.
  Error status() const { return status_; }
  bool ok() const { return status_ == Error::kOk; }

  // A copy of the key's value, or nullopt. Lock-free; CMap::Find's contract.
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline std::optional<Value> Find(
      const HashPair& h) const;
  // CMap::TryVisit's contract: fn runs at most once per table probed that
  // holds the key; kChanged when a writer entered the slot while fn ran.
  template <typename Fn>
  VisitOutcome TryVisit(const HashPair& h, Fn&& fn) const;
  // CMap::Prefetch on every table a lookup of h would probe.
  void Prefetch(const HashPair& h, int step) const {
    const Tables t = Load();
    const HashPair k = TableKey(h);
    if (t.old != nullptr) t.old->Prefetch(k, step);
    t.current->Prefetch(k, step);
  }
  // CMap::UpdateInPlace's contract (fn runs at most once): kOk,
  // kKeyNotFound, or kAbandonedSet (another writer, or the migrator, held
  // the key's slot; nothing changed; retry). Lock-free.
  template <typename Fn>
  Error UpdateInPlace(const HashPair& h, Fn&& fn);

  // REQUIRES: the external write lock. CMap::Set's results; while growing,
  // kCacheFull when capacity() keys are live in both tables together.
  CMapSetResult Set(const HashPair& h, const Value& v);
  // REQUIRES: the external write lock.
  FindAndEraseResult<Value> FindAndEraseByHash(const HashPair& h);

  // Live keys in both tables (exact under the external lock).
  size_t size() const;
  // Keys admitted: the new table's capacity while growing.
  size_t capacity() const {
    return current_.load(std::memory_order_acquire)->capacity();
  }

  // ---- Growth ---------------------------------------------------------------

  // A table for `capacity` keys to pass to BeginGrow. Maps memory: call it
  // WITHOUT the external lock. Check the table's status().
  static std::unique_ptr<Table> AllocateTable(size_t capacity,
                                              RawAllocator alloc,
                                              KeyHasher hasher = KeyHasher()) {
    return std::make_unique<Table>(capacity, hasher, alloc);
  }
  // Starts moving keys into `bigger`. kInvalidArgument if already growing,
  // if `bigger` is null or its capacity is not above capacity(); the
  // table's status() if its construction failed. REQUIRES: the external
  // write lock.
  Error BeginGrow(std::unique_ptr<Table> bigger);
  // Starts moving keys into `smaller`, as BeginGrow (the same migration,
  // release and retirement follow): kInvalidArgument if already growing, if
  // `smaller` is null, its capacity not below capacity(), or below size()
  // (claim (e): it must admit every key there is); the table's status() if
  // its construction failed. REQUIRES: the external write lock.
  Error BeginShrink(std::unique_ptr<Table> smaller);
  // Whether a growth or a shrink is under way. Exact under the external
  // write lock.
  bool growing() const {
    return old_.load(std::memory_order_relaxed) != nullptr;
  }
  // Moves up to `max_keys` keys from the old table to the new one and
  // returns the keys left in the old table (0 when not growing). When it
  // returns 0 the growth is over: the old table is retired for
  // ReleaseRetired. A slot held by a concurrent UpdateInPlace is left for
  // the next call. REQUIRES: the external write lock.
  size_t MigrateSome(size_t max_keys);
  // Gives back the pages of the tables retired since the last call, and
  // while growing those of the old table's slots the migration has left
  // behind for good ("Released behind the cursor"), once at least
  // `min_batch_bytes` of them are ready (a retired table is released
  // whatever its size). Returns the bytes released; the address ranges stay
  // reserved until the destructor. Call it WITHOUT the external lock
  // (madvise can take mmap_lock); calls are serialized among themselves.
  size_t ReleaseRetired(size_t min_batch_bytes = 0);
  // Bytes given back so far by ReleaseRetired (still mapped, no longer
  // resident).
  size_t released_bytes() const {
    return released_bytes_.load(std::memory_order_relaxed);
  }

  // The bytes a table for `capacity` keys takes from its allocator.
  static size_t BytesFor(size_t capacity) { return Table::BytesFor(capacity); }

 private:
  friend class cmap_internal::CMapTestPeer;

  // The tables of one epoch, as a reader loaded them.
  struct Tables {
    uint64_t epoch;
    Table* old;      // null when not growing
    Table* current;
  };

  // The key a table sees (see "Table keys").
  static HashPair TableKey(const HashPair& h) { return HashPair{h.h2, h.h2}; }

  // Step 1 of a round. Acquire loads: a table's construction (and, via the
  // epoch, the switch that published it) is visible before it is probed.
  Tables Load() const {
    Tables t;
    t.epoch = epoch_.load(std::memory_order_acquire);
    t.old = old_.load(std::memory_order_acquire);
    t.current = current_.load(std::memory_order_acquire);
    return t;
  }
  // Step 4: whether a miss in `t` is a miss of the map (claim (c)).
  bool Unchanged(const Tables& t) const {
    cmap_internal::AcquireFence();
    return (t.epoch & 1) == 0 &&
           epoch_.load(std::memory_order_relaxed) == t.epoch;
  }
  // Steps 1-4 once. *settled is false when a miss must go round again
  // (claim (c)); the rounds after the first run out of line, with a
  // backoff, so that the inlined lookup stays one round long.
  ABSL_ATTRIBUTE_ALWAYS_INLINE inline std::optional<Value> FindRound(
      const HashPair& k, bool* settled) const;
  ABSL_ATTRIBUTE_NOINLINE std::optional<Value> FindAgain(
      const HashPair& k) const;
  template <typename Fn>
  VisitOutcome TryVisitRound(const HashPair& k, Fn& fn, bool* settled) const;
  template <typename Fn>
  ABSL_ATTRIBUTE_NOINLINE VisitOutcome TryVisitAgain(const HashPair& k,
                                                     Fn& fn) const;

  // A seqlock write of (old_, current_). REQUIRES: the external write lock.
  void Switch(Table* old, Table* current);
  // BeginGrow and BeginShrink once their checks passed: `next` becomes the
  // new table. REQUIRES: the external write lock.
  void BeginMigration(std::unique_ptr<Table> next);

  Error status_ = Error::kOk;

  // Read by every lookup; written only by switches (under the external
  // lock), so the line stays shared.
  alignas(kCacheLineSize) std::atomic<uint64_t> epoch_{0};
  std::atomic<Table*> old_{nullptr};
  std::atomic<Table*> current_{nullptr};

  // Under the external write lock.
  std::unique_ptr<Table> current_owned_;
  std::unique_ptr<Table> old_owned_;
  size_t cursor_ = 0;  // MigrateSome's next slot in the old table
  // The old table's groups [0, clear_groups_) lie wholly behind the
  // cursor: their slots hold no key, for good.
  size_t clear_groups_ = 0;

  // Retired tables: owned until the destructor; `unreleased_` lists those
  // ReleaseRetired has not released yet; `draining_` is the old table while
  // growing and `releasable_groups_` its clear_groups_ as last published.
  // Its own mutex, because retirement happens under the external lock and
  // release without it (MigrateSome holds it for a few stores, never
  // across a system call).
  Mutex retired_mu_;
  std::vector<std::unique_ptr<Table>> retired_ ABSL_GUARDED_BY(retired_mu_);
  std::vector<Table*> unreleased_ ABSL_GUARDED_BY(retired_mu_);
  Table* draining_ ABSL_GUARDED_BY(retired_mu_) = nullptr;
  size_t releasable_groups_ ABSL_GUARDED_BY(retired_mu_) = 0;

  // ReleaseRetired's own state, held across its madvise calls: the table
  // whose groups below releasing_groups_ it released (releasing_bytes_ of
  // them), so that the table's release when retired counts only the rest.
  Mutex release_mu_;
  const Table* releasing_ ABSL_GUARDED_BY(release_mu_) = nullptr;
  size_t releasing_groups_ ABSL_GUARDED_BY(release_mu_) = 0;
  size_t releasing_bytes_ ABSL_GUARDED_BY(release_mu_) = 0;
  std::atomic<size_t> released_bytes_{0};
};

// ---------------------------------------------------------------------------
// Implementation
// ---------------------------------------------------------------------------

template <typename Value>
std::optional<Value> ResizableCMap<Value>::Find(const HashPair& h) const {
  const HashPair k = TableKey(h);
  bool settled;
  std::optional<Value> v = FindRound(k, &settled);
  if (v.has_value() || settled) return v;
  return FindAgain(k);
}

template <typename Value>
std::optional<Value> ResizableCMap<Value>::FindRound(const HashPair& k,
                                                     bool* settled) const {
  *settled = true;
  const Tables t = Load();
  if (t.old != nullptr) {
    if (std::optional<Value> v = t.old->Find(k)) return v;
    cmap_internal::AcquireFence();  // claim (b)
  }
  if (std::optional<Value> v = t.current->Find(k)) return v;
  *settled = Unchanged(t);
  return std::nullopt;
}

template <typename Value>
std::optional<Value> ResizableCMap<Value>::FindAgain(const HashPair& k) const {
  for (cmap_internal::Backoff backoff;;) {
    backoff.Wait();  // a switch is under way or just happened
    bool settled;
    std::optional<Value> v = FindRound(k, &settled);
    if (v.has_value() || settled) return v;
  }
}

template <typename Value>
template <typename Fn>
auto ResizableCMap<Value>::TryVisit(const HashPair& h, Fn&& fn) const
    -> VisitOutcome {
  const HashPair k = TableKey(h);
  bool settled;
  const VisitOutcome o = TryVisitRound(k, fn, &settled);
  if (o != VisitOutcome::kAbsent || settled) return o;
  return TryVisitAgain(k, fn);
}

template <typename Value>
template <typename Fn>
auto ResizableCMap<Value>::TryVisitRound(const HashPair& k, Fn& fn,
                                         bool* settled) const -> VisitOutcome {
  *settled = true;
  const Tables t = Load();
  if (t.old != nullptr) {
    const VisitOutcome o = t.old->TryVisit(k, fn);
    if (o != VisitOutcome::kAbsent) return o;
    cmap_internal::AcquireFence();  // claim (b)
  }
  const VisitOutcome o = t.current->TryVisit(k, fn);
  if (o != VisitOutcome::kAbsent) return o;
  *settled = Unchanged(t);
  return o;
}

template <typename Value>
template <typename Fn>
auto ResizableCMap<Value>::TryVisitAgain(const HashPair& k, Fn& fn) const
    -> VisitOutcome {
  for (cmap_internal::Backoff backoff;;) {
    backoff.Wait();  // a switch is under way or just happened
    bool settled;
    const VisitOutcome o = TryVisitRound(k, fn, &settled);
    if (o != VisitOutcome::kAbsent || settled) return o;
  }
}

template <typename Value>
template <typename Fn>
Error ResizableCMap<Value>::UpdateInPlace(const HashPair& h, Fn&& fn) {
  const HashPair k = TableKey(h);
  for (cmap_internal::Backoff backoff;;) {
    const Tables t = Load();
    Error in_old = Error::kKeyNotFound;
    if (t.old != nullptr) {
      in_old = t.old->UpdateInPlace(k, fn);
      if (in_old == Error::kOk) return in_old;
      cmap_internal::AcquireFence();  // claims (b) and (d)
    }
    const Error in_current = t.current->UpdateInPlace(k, fn);
    if (in_current != Error::kKeyNotFound) return in_current;
    if (in_old == Error::kAbandonedSet) return in_old;
    if (Unchanged(t)) return Error::kKeyNotFound;
    backoff.Wait();  // a switch is under way or just happened
  }
}

template <typename Value>
CMapSetResult ResizableCMap<Value>::Set(const HashPair& h, const Value& v) {
  const HashPair k = TableKey(h);
  Table* const current = current_.load(std::memory_order_relaxed);
  Table* const old = old_.load(std::memory_order_relaxed);
  if (old != nullptr) {
    // Overwrite where the key is; insert only into the new table.
    const auto assign = [&v](Value& x) { x = v; };
    Error err = old->UpdateInPlace(k, assign);
    if (err != Error::kKeyNotFound) return {err, false};
    err = current->UpdateInPlace(k, assign);
    if (err != Error::kKeyNotFound) return {err, false};
    if (old->size() + current->size() >= current->capacity()) {
      return {Error::kCacheFull, false};
    }
  }
  return current->Set(k, v);
}

template <typename Value>
FindAndEraseResult<Value> ResizableCMap<Value>::FindAndEraseByHash(
    const HashPair& h) {
  const HashPair k = TableKey(h);
  if (Table* const old = old_.load(std::memory_order_relaxed)) {
    FindAndEraseResult<Value> r = old->FindAndEraseByHash(k);
    if (r.err != Error::kKeyNotFound) return r;
  }
  return current_.load(std::memory_order_relaxed)->FindAndEraseByHash(k);
}

template <typename Value>
size_t ResizableCMap<Value>::size() const {
  const Tables t = Load();
  return (t.old != nullptr ? t.old->size() : 0) + t.current->size();
}

template <typename Value>
void ResizableCMap<Value>::Switch(Table* old, Table* current) {
  const uint64_t e = epoch_.load(std::memory_order_relaxed);
  epoch_.store(e + 1, std::memory_order_relaxed);
  // Orders the odd epoch before the pointer stores, for readers whose
  // acquire fence follows a load of one of them (claim (c)).
  cmap_internal::ReleaseFence();
  old_.store(old, std::memory_order_relaxed);
  current_.store(current, std::memory_order_release);
  epoch_.store(e + 2, std::memory_order_release);
}

template <typename Value>
Error ResizableCMap<Value>::BeginGrow(std::unique_ptr<Table> bigger) {
  if (growing() || bigger == nullptr) return Error::kInvalidArgument;
  if (!bigger->ok()) return bigger->status();
  if (!ok() || bigger->capacity() <= current_owned_->capacity()) {
    return Error::kInvalidArgument;
  }
  BeginMigration(std::move(bigger));
  return Error::kOk;
}

template <typename Value>
Error ResizableCMap<Value>::BeginShrink(std::unique_ptr<Table> smaller) {
  if (growing() || smaller == nullptr) return Error::kInvalidArgument;
  if (!smaller->ok()) return smaller->status();
  if (!ok() || smaller->capacity() >= current_owned_->capacity() ||
      smaller->capacity() < current_owned_->size()) {
    return Error::kInvalidArgument;
  }
  BeginMigration(std::move(smaller));
  return Error::kOk;
}

template <typename Value>
void ResizableCMap<Value>::BeginMigration(std::unique_ptr<Table> next) {
  old_owned_ = std::move(current_owned_);
  current_owned_ = std::move(next);
  cursor_ = 0;
  clear_groups_ = 0;
  {
    MutexLock hold(&retired_mu_);
    draining_ = old_owned_.get();
    releasable_groups_ = 0;
  }
  Switch(old_owned_.get(), current_owned_.get());
}

template <typename Value>
size_t ResizableCMap<Value>::MigrateSome(size_t max_keys) {
  if (!growing()) return 0;
  Table& old = *old_owned_;
  old.MoveSomeTo(*current_owned_, &cursor_, max_keys);
  const size_t left = old.size();
  if (left > 0) {
    // Claim (f): the groups wholly behind the cursor hold no key for good.
    const size_t behind =
        std::min(cursor_, old.slot_count()) / cmap_internal::kGroupWidth;
    if (behind > clear_groups_) {
      clear_groups_ = behind;
      MutexLock hold(&retired_mu_);
      releasable_groups_ = behind;
    }
    return left;
  }
  Switch(nullptr, current_owned_.get());
  MutexLock hold(&retired_mu_);
  draining_ = nullptr;
  unreleased_.push_back(old_owned_.get());
  retired_.push_back(std::move(old_owned_));
  return 0;
}

template <typename Value>
size_t ResizableCMap<Value>::ReleaseRetired(size_t min_batch_bytes) {
  MutexLock releasing(&release_mu_);
  std::vector<Table*> tables;
  Table* draining;
  size_t releasable;
  {
    MutexLock hold(&retired_mu_);
    tables.swap(unreleased_);
    draining = draining_;
    releasable = releasable_groups_;
  }
  // Outside retired_mu_: a migration or retirement under the external lock
  // never waits for madvise. The tables stay owned (old_owned_ or
  // retired_) until the destructor, so the pointers stay valid.
  size_t bytes = 0;
  if (draining != nullptr) {
    if (draining != releasing_) {
      releasing_ = draining;
      releasing_groups_ = 0;
      releasing_bytes_ = 0;
    }
    const size_t ready = releasable > releasing_groups_
                             ? releasable - releasing_groups_
                             : 0;
    if (ready > 0 &&
        ready * Table::SlotBytesPerGroup() >= min_batch_bytes) {
      const size_t b =
          draining->ReleaseSlotsBelow(releasing_groups_, releasable);
      releasing_groups_ = releasable;
      releasing_bytes_ += b;
      bytes += b;
    }
  }
  for (Table* t : tables) {
    size_t b = t->ReleaseMemory();
    if (t == releasing_) {
      b -= std::min(b, releasing_bytes_);  // released behind the cursor
      releasing_ = nullptr;
    }
    bytes += b;
  }
  released_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  return bytes;
}

}  // namespace furrballs

#endif  // FURRBALLS_ENGINE_CMAP_RESIZABLE_CMAP_H_
