#include "engine/furrball/page_pool.h"

#include <algorithm>
#include <cassert>
#include <functional>

namespace furrballs {
namespace furrball_internal {

PagePool::PagePool(uint8_t* data, uint32_t page_count, uint32_t page_size,
                   std::pmr::memory_resource* resource, bool cold_pages)
    : page_count_(page_count),
      page_size_(page_size),
      pages_(page_count, resource),
      free_(resource),
      cold_pages_(cold_pages),
      relocation_tier_(cold_pages ? PageTier::kHot : PageTier::kCold) {
  assert(page_count >= kMinPages);
  assert(page_size >= kMinPageSize && page_size <= kMaxPageSize);
  free_.reserve(page_count);
  for (uint32_t i = 0; i < page_count; ++i) {
    pages_[i].data = data + size_t{i} * page_size;
  }
  Open(0, PageTier::kHot);
  Open(staging_page(), PageTier::kStaging);
  // Highest index at the bottom of the stack, so pages are handed out in
  // address order (nothing depends on it; it reads well in a census).
  {
    SpinLockHolder l(free_lock_);
    for (uint32_t i = staging_page() - 1; i >= 1; --i) free_.push_back(i);
  }
  free_count_.store(page_count - 2, std::memory_order_release);
}

size_t PagePool::metadata_bytes() const {
  return pages_.capacity() * sizeof(Page) + page_count_ * sizeof(uint32_t);
}

bool PagePool::TryBump(uint32_t page, uint32_t capacity, Reservation* out,
                       std::optional<PageTier> tier) {
  Page& p = pages_[page];
  uint64_t w = p.state.load(std::memory_order_relaxed);
  for (;;) {
    if (!PageState::IsOpen(w)) return false;
    if (tier.has_value() && PageState::Tier(w) != *tier) return false;
    const uint32_t used = PageState::Used(w);
    if (uint64_t{used} + capacity > page_size_) return false;
    // Acquire: our stores into the page must come after the recycle that
    // emptied it (its release store of the EMPTY state).
    if (p.state.compare_exchange_weak(
            w, w + capacity + PageState::kPendingOne,
            std::memory_order_acquire, std::memory_order_relaxed)) {
      out->page = page;
      out->offset = used;
      // Relaxed: the generation changes only while the page is FREEZE, and
      // the acquire above ordered us after that.
      out->generation = p.generation.load(std::memory_order_relaxed);
      out->capacity = capacity;
      return true;
    }
  }
}

void PagePool::Open(uint32_t page, PageTier tier) {
  pages_[page].opened.store(
      open_count_.fetch_add(1, std::memory_order_relaxed),
      std::memory_order_relaxed);
  pages_[page].state.store(PageState::Make(tier, true, 0),
                           std::memory_order_release);
}

uint64_t PagePool::Seal(uint32_t page) {
  const uint64_t before = pages_[page].state.fetch_and(
      ~PageState::kOpen, std::memory_order_acq_rel);
  // Sealing a page that is no longer open (already sealed, frozen, or
  // recycled since the caller looked) changes nothing and wastes nothing.
  if (!PageState::IsOpen(before)) return 0;
  return page_size_ - PageState::Used(before);
}

bool PagePool::ReserveOnCurrent(uint32_t capacity, Reservation* out,
                                ReserveSource* source, uint64_t* tail_waste) {
  *tail_waste = 0;
  const std::optional<PageTier> hot = WriterTier(PageTier::kHot);
  uint32_t current = current_.load(std::memory_order_acquire);
  if (TryBump(current, capacity, out, hot)) {
    *source = ReserveSource::kCurrent;
    return true;
  }
  SpinLockHolder l(rotate_lock_);
  // Another writer may have rotated while we waited.
  current = current_.load(std::memory_order_acquire);
  if (TryBump(current, capacity, out, hot)) {
    *source = ReserveSource::kCurrent;
    return true;
  }
  uint32_t fresh;
  if (!PopFree(&fresh, kRelocationReserve)) return false;
  Open(fresh, PageTier::kHot);
  // The fresh page is not visible to anyone until this store; reserve on it
  // first so that a value as large as a page always gets its page.
  const bool ok = TryBump(fresh, capacity, out);
  current_.store(fresh, std::memory_order_release);
  // A sealed current page may have been recycled by the reclaimer (and even
  // handed back to us as `fresh`); only a page we did not just open is ours
  // to seal.
  if (current != fresh) *tail_waste = Seal(current);
  *source = ReserveSource::kFreshPage;
  return ok;
}

bool PagePool::ReserveOnStaging(uint32_t capacity, Reservation* out) {
  return TryBump(staging_page(), capacity, out,
                 WriterTier(PageTier::kStaging));
}

bool PagePool::PopFree(uint32_t* page, uint32_t keep) {
  SpinLockHolder l(free_lock_);
  if (free_.size() <= keep) return false;
  *page = free_.back();
  free_.pop_back();
  free_count_.store(static_cast<uint32_t>(free_.size()),
                    std::memory_order_release);
  return true;
}

void PagePool::PushFree(uint32_t page) {
  SpinLockHolder l(free_lock_);
  free_.push_back(page);
  free_count_.store(static_cast<uint32_t>(free_.size()),
                    std::memory_order_release);
}

uint32_t PagePool::RetireFreePages(uint32_t n, uint32_t keep) {
  uint32_t taken = 0;
  {
    SpinLockHolder l(free_lock_);
    if (free_.size() <= keep) return 0;
    taken = std::min<uint32_t>(n, static_cast<uint32_t>(free_.size()) - keep);
    if (taken == 0) return 0;
    // Highest numbers at the bottom of the stack and the lowest on top, as
    // the constructor leaves it: the `taken` highest are then the bottom
    // ones, and Sets keep taking pages in address order. Retiring is rare
    // (a key table growth), so sorting a few thousand numbers is cheap.
    std::sort(free_.begin(), free_.end(), std::greater<uint32_t>());
    for (uint32_t i = 0; i < taken; ++i) {
      pages_[free_[i]].state.store(
          PageState::Make(PageTier::kRetired, false, 0),
          std::memory_order_relaxed);
    }
    free_.erase(free_.begin(), free_.begin() + taken);
    free_count_.store(static_cast<uint32_t>(free_.size()),
                      std::memory_order_release);
  }
  retired_count_.fetch_add(taken, std::memory_order_relaxed);
  // The memory goes back with no SpinLock held (madvise is a system call).
  // Pages retired earlier are released again, which costs a page-table
  // walk and keeps the pool from having to remember which are new. A page
  // the kernel would not release stays out of service all the same.
  for (uint32_t i = 0; i < page_count_; ++i) {
    if (PageState::Tier(pages_[i].state.load(std::memory_order_relaxed)) ==
        PageTier::kRetired) {
      RawAllocator::ReleaseMappedPages(nullptr, pages_[i].data, page_size_);
    }
  }
  return taken;
}

uint32_t PagePool::UnretirePages(uint32_t n) {
  uint32_t back = 0;
  for (uint32_t i = 0; i < page_count_ && back < n; ++i) {
    if (PageState::Tier(pages_[i].state.load(std::memory_order_relaxed)) !=
        PageTier::kRetired) {
      continue;
    }
    // Release, as Recycle's: the next writer's acquire bump comes after.
    pages_[i].state.store(PageState::Make(PageTier::kEmpty, false, 0),
                          std::memory_order_release);
    PushFree(i);
    ++back;
  }
  retired_count_.fetch_sub(back, std::memory_order_relaxed);
  return back;
}

bool PagePool::TryFreeze(uint32_t page, uint64_t* state_before) {
  Page& p = pages_[page];
  uint64_t w = p.state.load(std::memory_order_acquire);
  const PageTier tier = PageState::Tier(w);
  if (PageState::IsOpen(w) || PageState::Pending(w) != 0 ||
      tier == PageTier::kEmpty || tier == PageTier::kFreeze ||
      tier == PageTier::kRetired) {
    return false;
  }
  const uint64_t frozen =
      (w & ~PageState::kTierMask) |
      (uint64_t{static_cast<uint8_t>(PageTier::kFreeze)}
       << PageState::kTierShift);
  // Acquire: pairs with the release of the last EndWrite, so every header
  // on the page and every Publish is visible to the walk that follows.
  if (!p.state.compare_exchange_strong(w, frozen, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
    return false;
  }
  *state_before = w;
  return true;
}

bool PagePool::FinishFreeze(uint32_t page, uint64_t state_before) {
  // Acquire: pairs with Unpublish's release, so the CMap changes that took
  // every entry off this page happen before the page is reused.
  if ((pages_[page].live.load(std::memory_order_acquire) & 0xffffffffull) !=
      0) {
    pages_[page].state.store(state_before, std::memory_order_release);
    return false;
  }
  Recycle(page);
  return true;
}

void PagePool::Recycle(uint32_t page) {
  Page& p = pages_[page];
  p.generation.fetch_add(1, std::memory_order_relaxed);
  p.live.store(0, std::memory_order_relaxed);
  if (page == staging_page()) {
    // The staging page keeps its designation (§2.10.3).
    Open(page, PageTier::kStaging);
    return;
  }
  // Release: the generation bump and everything the recycler saw happen
  // before the next writer's acquire bump.
  p.state.store(PageState::Make(PageTier::kEmpty, false, 0),
                std::memory_order_release);
  PushFree(page);
}

uint32_t PagePool::RecycleDeadPages() {
  uint32_t recycled = 0;
  for (uint32_t i = 0; i < page_count_; ++i) {
    const uint64_t w = pages_[i].state.load(std::memory_order_relaxed);
    if (PageState::IsOpen(w)) continue;
    if ((pages_[i].live.load(std::memory_order_relaxed) & 0xffffffffull) !=
        0) {
      continue;
    }
    uint64_t before;
    if (!TryFreeze(i, &before)) continue;
    if (FinishFreeze(i, before)) ++recycled;
  }
  return recycled;
}

bool PagePool::SealStaging() {
  const uint64_t before = pages_[staging_page()].state.fetch_and(
      ~PageState::kOpen, std::memory_order_acq_rel);
  return PageState::IsOpen(before);
}

void PagePool::ReopenStaging() {
  pages_[staging_page()].state.fetch_or(PageState::kOpen,
                                        std::memory_order_release);
}

bool PagePool::ReserveForRelocation(uint32_t capacity, Reservation* out) {
  return ReserveOnDestination(&relocation_page_, relocation_tier_,
                              /*keep=*/0, capacity, out);
}

bool PagePool::ReserveForColdMigration(uint32_t capacity, bool for_drain,
                                       Reservation* out) {
  assert(cold_pages_);
  return ReserveOnDestination(&cold_page_, PageTier::kCold,
                              for_drain ? 0 : kRelocationReserve, capacity,
                              out);
}

bool PagePool::ReserveOnDestination(uint32_t* dest, PageTier tier,
                                    uint32_t keep, uint32_t capacity,
                                    Reservation* out) {
  if (*dest != kNoPage && TryBump(*dest, capacity, out)) return true;
  uint32_t fresh;
  if (!PopFree(&fresh, keep)) return false;
  if (*dest != kNoPage) Seal(*dest);
  *dest = fresh;
  Open(fresh, tier);
  return TryBump(fresh, capacity, out);
}

bool PagePool::SealColdPage(uint64_t* tail_waste) {
  *tail_waste = 0;
  if (cold_page_ == kNoPage) return false;
  const uint64_t w = pages_[cold_page_].state.load(std::memory_order_relaxed);
  if (PageState::Used(w) == 0) return false;
  *tail_waste = Seal(cold_page_);
  cold_page_ = kNoPage;
  return true;
}

bool PagePool::SealOpenPagesForReclaim(uint64_t* tail_waste) {
  const uint32_t current = current_.load(std::memory_order_acquire);
  bool sealed = PageState::IsOpen(
      pages_[current].state.load(std::memory_order_relaxed));
  *tail_waste = Seal(current);
  if (relocation_page_ != kNoPage) {
    sealed |= PageState::IsOpen(
        pages_[relocation_page_].state.load(std::memory_order_relaxed));
    *tail_waste += Seal(relocation_page_);
    relocation_page_ = kNoPage;
  }
  if (cold_page_ != kNoPage) {
    sealed |= PageState::IsOpen(
        pages_[cold_page_].state.load(std::memory_order_relaxed));
    *tail_waste += Seal(cold_page_);
    cold_page_ = kNoPage;
  }
  return sealed;
}

uint32_t PagePool::relocation_room() const {
  if (relocation_page_ == kNoPage) return 0;
  const uint64_t w =
      pages_[relocation_page_].state.load(std::memory_order_relaxed);
  return page_size_ - PageState::Used(w);
}

uint32_t PagePool::staging_room() const {
  const uint64_t w = pages_[staging_page()].state.load(std::memory_order_relaxed);
  if (!PageState::IsOpen(w)) return 0;
  return page_size_ - PageState::Used(w);
}

bool PagePool::SealedWithLiveBytes(uint32_t i, uint64_t* live_bytes) const {
  if (i == staging_page()) return false;
  const uint64_t w = pages_[i].state.load(std::memory_order_relaxed);
  const PageTier tier = PageState::Tier(w);
  if (PageState::IsOpen(w) || PageState::Pending(w) != 0 ||
      tier == PageTier::kEmpty || tier == PageTier::kFreeze ||
      tier == PageTier::kRetired) {
    return false;
  }
  *live_bytes = pages_[i].live.load(std::memory_order_relaxed) & 0xffffffffull;
  return true;
}

uint32_t PagePool::SparsestSealedPage(uint64_t* live_bytes) const {
  uint32_t best = kNoPage;
  uint64_t best_live = UINT64_MAX;
  for (uint32_t i = 0; i < page_count_; ++i) {
    uint64_t live;
    if (SealedWithLiveBytes(i, &live) && live < best_live) {
      best = i;
      best_live = live;
    }
  }
  *live_bytes = best == kNoPage ? 0 : best_live;
  return best;
}

uint32_t PagePool::EvictionCandidate(uint64_t* live_bytes) const {
  *live_bytes = 0;
  uint64_t sparsest = 0;
  if (SparsestSealedPage(&sparsest) == kNoPage) return kNoPage;
  // Ages are counted back from now, so that the open count may wrap.
  const uint32_t now = open_count_.load(std::memory_order_relaxed);
  uint32_t best = kNoPage;
  uint32_t best_age = 0;
  for (uint32_t i = 0; i < page_count_; ++i) {
    uint64_t live;
    if (!SealedWithLiveBytes(i, &live) || live > sparsest + page_size_ / 8) {
      continue;
    }
    const uint32_t age =
        now - pages_[i].opened.load(std::memory_order_relaxed);
    if (best == kNoPage || age > best_age) {
      best = i;
      best_age = age;
      *live_bytes = live;
    }
  }
  return best;
}

uint32_t PagePool::FullestSealedPage(PageTier tier,
                                     uint64_t* live_bytes) const {
  uint32_t best = kNoPage;
  uint64_t best_live = 0;
  for (uint32_t i = 0; i < page_count_; ++i) {
    const uint64_t w = pages_[i].state.load(std::memory_order_relaxed);
    if (PageState::IsOpen(w) || PageState::Pending(w) != 0 ||
        PageState::Tier(w) != tier) {
      continue;
    }
    const uint64_t live =
        pages_[i].live.load(std::memory_order_relaxed) & 0xffffffffull;
    if (live > best_live) {
      best = i;
      best_live = live;
    }
  }
  *live_bytes = best_live;
  return best;
}

PoolCensus PagePool::Census() const {
  PoolCensus c;
  for (uint32_t i = 0; i < page_count_; ++i) {
    const uint64_t w = pages_[i].state.load(std::memory_order_relaxed);
    const uint64_t live = pages_[i].live.load(std::memory_order_relaxed);
    switch (PageState::Tier(w)) {
      case PageTier::kHot: ++c.pages_hot; break;
      case PageTier::kCold: ++c.pages_cold; break;
      case PageTier::kEmpty: ++c.pages_empty; break;
      case PageTier::kFreeze: ++c.pages_freeze; break;
      case PageTier::kStaging:
        ++c.pages_staging;
        c.staging_used_bytes += PageState::Used(w);
        break;
      case PageTier::kRetired: ++c.pages_retired; break;
    }
    c.used_bytes += PageState::Used(w);
    c.live_bytes += live & 0xffffffffull;
    c.live_entries += live >> 32;
  }
  return c;
}

}  // namespace furrball_internal
}  // namespace furrballs
