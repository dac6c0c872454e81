// engine/cmap/internal/slot.h: CMap's slot array (report §2.7.2, §3.10) and
// the seqlock primitives that guard a slot (§2.7.5, §3.11).
//
// Thread safety: SlotArray is initialised by one thread before the map is
// shared, then only handed out as SlotRefs whose every field is a
// std::atomic. The seqlock functions are the protocol documented in cmap.h;
// they are safe to call concurrently from any thread.
//
// A slot has three parts, all of them 8-byte atomic words:
//
//   seq          low 32 bits: even = stable, odd = a writer is inside (cmap.h
//                explains why wider than the report's uint8_t); high 32
//                bits: the value's tail, if it has one (below), else 0
//   fingerprint  the key's full 64-bit H2
//   value        kValueWords<Value> words holding the Value's bytes
//
// The tail. A Value longer than 8 bytes whose last word would hold only 1 to
// 4 bytes keeps those bytes in the seq word's high half instead of a word of
// its own (kTailBytes): the engine's 20-byte KeyMeta then takes a 32-byte
// slot, not 40, and a 32-bit sequence is still far from wrapping inside a
// reader's window (cmap.h, "ABA on seq"). The tail changes only while its
// writer holds the slot (seq odd) and is published by Unlock's release store
// of the whole word, so a reader that compares the whole word at R1 and R4
// validates the tail with the sequence.
//
// Layout: slots packed back to back, [seq | fingerprint | value] at a stride
// of 16 + 8 * kValueWords<Value> bytes (32 for the engine's 20-byte KeyMeta),
// 8-byte aligned. The report gives every slot its own cache line
// so that writers of neighbouring slots never invalidate each other's seq
// (§2.7.1, §3.10); that costs 8 to 48 padding bytes per slot, about a
// seventh of a cache entry's whole metadata, for a conflict that needs two
// hot keys hashed next to each other. The key table is the largest part of
// the per-key cost a budget pays for (issue 13), so slots are packed;
// docs/cmap.md has the measurement behind the choice.
//
// The value is stored as words rather than as a Value so that readers can
// copy it with relaxed atomic loads while a writer may be storing it: with a
// plain memcpy that overlap would be a data race, which is undefined
// behaviour even though the seqlock discards the torn copy afterwards
// (H. Boehm, "Can Seqlocks Get Along with Programming Language Memory
// Models?", MSPC 2012). Word copies compile to plain moves on x86-64.
#ifndef FURRBALLS_ENGINE_CMAP_INTERNAL_SLOT_H_
#define FURRBALLS_ENGINE_CMAP_INTERNAL_SLOT_H_

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <thread>
#include <type_traits>

#if defined(__x86_64__) || defined(__i386__)
#include <emmintrin.h>
#endif

#include "engine/common/raw_allocator.h"

namespace furrballs::cmap_internal {

using Word = std::atomic<uint64_t>;
static_assert(Word::is_always_lock_free && sizeof(Word) == 8,
              "slots are copied as lock-free 8-byte atomic words");

inline constexpr size_t kSlotHeaderBytes = 2 * sizeof(Word);  // seq + fingerprint

// The seq word: the sequence in the low half, a value's tail in the high.
inline constexpr uint64_t kSeqMask = 0xffffffffu;
inline constexpr int kTailShift = 32;

// Bytes of the Value kept in the seq word's high half: its last 1 to 4 bytes
// when that is all its last word would hold (and it has at least one whole
// word, so that a slot always has a value word), else 0.
template <typename Value>
inline constexpr size_t kTailBytes =
    sizeof(Value) > 8 && sizeof(Value) % 8 != 0 && sizeof(Value) % 8 <= 4
        ? sizeof(Value) % 8
        : 0;
// The Value's bytes as words (the last one zero-padded), tail included.
template <typename Value>
inline constexpr size_t kBufferWords = (sizeof(Value) + 7) / 8;
// The words a slot stores the Value in besides the tail.
template <typename Value>
inline constexpr size_t kValueWords =
    kBufferWords<Value> - (kTailBytes<Value> != 0 ? 1 : 0);
static_assert(kTailBytes<char[20]> == 4 && kValueWords<char[20]> == 2 &&
                  kTailBytes<char[16]> == 0 && kValueWords<char[16]> == 2 &&
                  kTailBytes<char[13]> == 0 && kValueWords<char[13]> == 2 &&
                  kTailBytes<char[4]> == 0 && kValueWords<char[4]> == 1,
              "a tail only when it saves a whole word and one word remains");

// One slot's fields.
struct SlotRef {
  Word& seq;
  Word& fingerprint;
  Word* value;  // kValueWords<Value> words
};

template <typename Value>
class SlotArray {
 public:
  static constexpr size_t BytesFor(size_t slots) { return slots * sizeof(Slot); }

  // Constructs `slots` slots in `memory` (seq 0 = stable, everything zero).
  // `zeroed`: the memory already holds zero bytes, which is exactly the
  // object representation of every field's initial value, so nothing is
  // written (std::atomic<uint64_t> is a plain 8-byte word here; the
  // static_asserts above pin that).
  // REQUIRES: `memory` is word aligned and BytesFor(slots) long.
  void Init(void* memory, size_t slots, bool zeroed) {
    slots_ = static_cast<Slot*>(memory);
    if (zeroed) return;
    for (size_t i = 0; i < slots; ++i) new (&slots_[i]) Slot{};
  }

  SlotRef operator[](size_t i) const {
    Slot& s = slots_[i];
    return SlotRef{s.seq, s.fingerprint, s.value};
  }

 private:
  struct Slot {
    Word seq;
    Word fingerprint;
    Word value[kValueWords<Value>];
  };
  static_assert(sizeof(Slot) == kSlotHeaderBytes + kValueWords<Value> * sizeof(Word),
                "packed layout: no padding between or inside slots");
  static_assert(std::is_trivially_destructible_v<Slot>,
                "slots are released without running destructors");

  Slot* slots_ = nullptr;
};

// Value <-> words. The caller's Value travels through a plain uint64_t buffer
// so that the shared words are only ever touched by atomic loads and stores.

template <typename Value>
using WordBuffer = std::array<uint64_t, kBufferWords<Value>>;
static_assert(std::endian::native == std::endian::little,
              "a tail is the low bytes of the buffer's last word, shifted into "
              "the seq word's high half");

template <typename Value>
WordBuffer<Value> ToWords(const Value& v) {
  WordBuffer<Value> buf;
  buf.back() = 0;  // defined bytes past sizeof(Value)
  std::memcpy(buf.data(), &v, sizeof(Value));
  return buf;
}

template <typename Value>
Value FromWords(const WordBuffer<Value>& buf) {
  std::array<unsigned char, sizeof(Value)> bytes;
  std::memcpy(bytes.data(), buf.data(), sizeof(Value));
  return std::bit_cast<Value>(bytes);
}

// Loads the value of slot `s` whose seq word the caller read as `seq_word`:
// a reader's R1 load (which its R4 validates) or a writer's `stable` (its
// TryLock changed only the sequence), so the tail costs no load of its own.
template <typename Value>
void LoadWords(const SlotRef& s, uint64_t seq_word, WordBuffer<Value>& dst) {
  for (size_t i = 0; i < kValueWords<Value>; ++i) {
    dst[i] = s.value[i].load(std::memory_order_relaxed);
  }
  if constexpr (kTailBytes<Value> != 0) dst.back() = seq_word >> kTailShift;
}

// Stores the value of slot `s`. REQUIRES: the caller holds the slot (seq
// odd), so nobody else writes the seq word until its Unlock, which
// publishes the tail with the sequence.
template <typename Value>
void StoreWords(const SlotRef& s, const WordBuffer<Value>& src) {
  for (size_t i = 0; i < kValueWords<Value>; ++i) {
    s.value[i].store(src[i], std::memory_order_relaxed);
  }
  if constexpr (kTailBytes<Value> != 0) {
    s.seq.store((src.back() << kTailShift) |
                    (s.seq.load(std::memory_order_relaxed) & kSeqMask),
                std::memory_order_relaxed);
  }
}

// Fences. ThreadSanitizer does not model standalone fences, and GCC 12 warns
// about each one (-Wtsan). That is harmless here: every access the fences
// order is itself atomic, so there is nothing TSAN could report, and the
// seqlock's correctness is checked by cmap_stress_test's self-validating
// values instead. The warning is silenced for these three functions only.
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wtsan"
#endif
inline void AcquireFence() { __atomic_thread_fence(__ATOMIC_ACQUIRE); }
inline void ReleaseFence() { __atomic_thread_fence(__ATOMIC_RELEASE); }
inline void SeqCstFence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
#if defined(__SANITIZE_THREAD__) && defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

// Writer entry, fail-fast: seq even -> odd, or false if another writer is
// inside (odd) or got there first (CAS lost). No spinning (report §2.7.8).
// On success `*stable` is the even word found (sequence and tail), to be
// passed to Unlock. An even sequence plus one never carries into the tail.
//
// The CAS is `acquire` so that this writer sees everything the previous
// writer stored before its release in Unlock. The release fence after it
// keeps this writer's data stores from becoming visible before the odd seq:
// a reader that observes one of them then also observes the odd seq on its
// re-check (fence-to-fence synchronization with the reader's acquire fence).
// A release CAS would not do: release orders what comes before it, not after.
inline bool TryLock(Word& seq, uint64_t* stable) {
  uint64_t s = seq.load(std::memory_order_relaxed);
  if (s & 1) return false;
  if (!seq.compare_exchange_strong(s, s + 1, std::memory_order_acquire,
                                   std::memory_order_relaxed)) {
    return false;
  }
  ReleaseFence();
  *stable = s;
  return true;
}

// Writer exit: odd -> the next even sequence, modulo 2^32 but skipping 0,
// keeping the tail the writer stored (or found). Release: publishes every
// store made inside; pairs with readers' acquire loads of seq and with the
// next writer's acquire CAS.
//
// Sequence 0 means "never written": only a slot no writer has entered, or
// one whose pages were given back (RawAllocator::Release, which makes them
// read as zeros), has it. So a reader whose R1 read a slot that held a key
// can never read the same seq word again once the slot's memory is
// released, and retries instead of taking the zeros as a value
// (resizable_cmap.h, "Released tables").
inline void Unlock(Word& seq, uint64_t stable) {
  uint64_t next = (stable + 2) & kSeqMask;
  next += next == 0 ? 2 : 0;
  seq.store((seq.load(std::memory_order_relaxed) & ~kSeqMask) | next,
            std::memory_order_release);
}

// What a reader does while a writer is inside the slot: pause briefly, then
// give the CPU away, because on an oversubscribed machine the writer may be
// descheduled and spinning would only delay it.
class Backoff {
 public:
  void Wait() {
    if (++spins_ <= kSpinsBeforeYield) {
#if defined(__x86_64__) || defined(__i386__)
      _mm_pause();
#elif defined(__aarch64__)
      asm volatile("yield");
#endif
    } else {
      std::this_thread::yield();
    }
  }

 private:
  static constexpr uint32_t kSpinsBeforeYield = 64;
  uint32_t spins_ = 0;
};

}  // namespace furrballs::cmap_internal

#endif  // FURRBALLS_ENGINE_CMAP_INTERNAL_SLOT_H_
