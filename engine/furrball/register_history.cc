#include "engine/furrball/register_history.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <initializer_list>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <absl/strings/str_cat.h>

namespace furrballs {
namespace {

using Violation = RegisterCheck::Violation;
using Kind = RegisterOp::Kind;

constexpr uint64_t kNever = std::numeric_limits<uint64_t>::max();

RegisterCheck Fail(Violation v, std::string why,
                   std::initializer_list<const RegisterOp*> ops) {
  RegisterCheck r;
  r.violation = v;
  r.explanation = std::move(why);
  for (const RegisterOp* op : ops) {
    absl::StrAppend(&r.explanation, "\n  ", DescribeOp(*op));
  }
  return r;
}

bool IsMiss(const RegisterOp& op) {
  return (op.kind == Kind::kGet || op.kind == Kind::kDelete) && !op.found;
}

// The history split by kind, the Sets in version order (epoch k is
// sets[k - 1]), and the tick from which each Set's value may expire.
struct Prepared {
  std::vector<const RegisterOp*> sets;      // by version
  std::vector<uint64_t> expiry_from;        // by epoch - 1; kNever: no TTL
  std::vector<const RegisterOp*> hits;      // Gets that found a value
  std::vector<int> hit_epoch;               // parallel to hits
  std::vector<const RegisterOp*> absents;   // misses and Deletes
  std::vector<const RegisterOp*> removals;  // Deletes that returned true
};

// The earliest tick at which `set`'s value may have expired: its deadline is
// at least the clock before the Set plus its TTL (the clock before the Set
// is the value after the last advance that returned before it began), and
// the clock can reach that deadline from the invoke of the first advance to
// a value at or past it.
uint64_t ExpiryFrom(const RegisterOp& set,
                    const std::vector<const RegisterOp*>& advances,
                    uint64_t initial_clock_ms) {
  if (set.ttl_ms == 0) return kNever;
  uint64_t clock_before = initial_clock_ms;
  for (const RegisterOp* a : advances) {
    if (a->respond < set.invoke) clock_before = a->clock_ms;
  }
  for (const RegisterOp* a : advances) {
    if (a->clock_ms >= clock_before + set.ttl_ms) return a->invoke;
  }
  return kNever;
}

// R1 and the model's own requirements.
RegisterCheck Prepare(const std::vector<RegisterOp>& ops,
                      uint64_t initial_clock_ms, Prepared* p) {
  std::vector<const RegisterOp*> advances;
  for (const RegisterOp& op : ops) {
    if (op.invoke >= op.respond) {
      return Fail(Violation::kMalformed, "an op responds before it is invoked",
                  {&op});
    }
    switch (op.kind) {
      case Kind::kSet:
        p->sets.push_back(&op);
        break;
      case Kind::kGet:
        if (op.found) {
          p->hits.push_back(&op);
        } else {
          p->absents.push_back(&op);
        }
        break;
      case Kind::kDelete:
        p->absents.push_back(&op);
        if (op.found) p->removals.push_back(&op);
        break;
      case Kind::kAdvanceClock:
        advances.push_back(&op);
        break;
    }
  }
  std::sort(advances.begin(), advances.end(),
            [](auto* a, auto* b) { return a->invoke < b->invoke; });
  std::sort(p->sets.begin(), p->sets.end(),
            [](auto* a, auto* b) { return a->version < b->version; });
  std::unordered_map<std::string, int> epoch_of;
  for (size_t i = 0; i < p->sets.size(); ++i) {
    const RegisterOp* s = p->sets[i];
    if (i > 0 && p->sets[i - 1]->version == s->version) {
      return Fail(Violation::kVersionBackwards, "two Sets got one version",
                  {p->sets[i - 1], s});
    }
    if (!epoch_of.emplace(s->value, static_cast<int>(i) + 1).second) {
      return Fail(Violation::kMalformed,
                  "two Sets wrote one value (the test must write unique ones)",
                  {p->sets[epoch_of[s->value] - 1], s});
    }
    p->expiry_from.push_back(ExpiryFrom(*s, advances, initial_clock_ms));
  }
  for (const RegisterOp* g : p->hits) {
    const auto it = epoch_of.find(g->value);
    if (it == epoch_of.end()) {
      return Fail(Violation::kNeverWritten, "a Get read a value no Set wrote",
                  {g});
    }
    const RegisterOp* s = p->sets[it->second - 1];
    if (s->version != g->version) {
      return Fail(Violation::kNeverWritten,
                  "a Get read a value with another version than its Set's",
                  {s, g});
    }
    if (s->invoke > g->respond) {
      return Fail(Violation::kNeverWritten,
                  "a Get read a value before its Set was invoked", {s, g});
    }
    p->hit_epoch.push_back(it->second);
  }
  return RegisterCheck{};
}

// Walks `before` (sorted by respond) alongside the ops of `after` in invoke
// order; for each op of `after`, `best` is the best (by `better`) of the ops
// of `before` that returned before it was invoked, or null.
template <typename Better, typename Visit>
void SweepReturnedBefore(std::vector<const RegisterOp*> before,
                         std::vector<size_t> after_order,
                         const std::vector<const RegisterOp*>& after,
                         Better better, Visit visit) {
  std::sort(before.begin(), before.end(),
            [](auto* a, auto* b) { return a->respond < b->respond; });
  std::sort(after_order.begin(), after_order.end(), [&](size_t a, size_t b) {
    return after[a]->invoke < after[b]->invoke;
  });
  const RegisterOp* best = nullptr;
  size_t next = 0;
  for (size_t i : after_order) {
    while (next < before.size() && before[next]->respond < after[i]->invoke) {
      if (best == nullptr || better(before[next], best)) best = before[next];
      ++next;
    }
    visit(i, best);
  }
}

std::vector<size_t> Indexes(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

bool HigherVersion(const RegisterOp* a, const RegisterOp* b) {
  return a->version > b->version;
}

// The first op of `after` invoked after an op of `before` of a higher
// version (or an equal one, with `or_equal`) returned, as violation `v`.
RegisterCheck NewerReturnedBefore(const std::vector<const RegisterOp*>& before,
                                  const std::vector<const RegisterOp*>& after,
                                  bool or_equal, Violation v, const char* why) {
  RegisterCheck r;
  SweepReturnedBefore(before, Indexes(after.size()), after, HigherVersion,
                      [&](size_t i, const RegisterOp* a) {
                        if (r.ok() && a != nullptr &&
                            (a->version > after[i]->version ||
                             (or_equal && a->version == after[i]->version))) {
                          r = Fail(v, why, {a, after[i]});
                        }
                      });
  return r;
}

// R2-R5.
RegisterCheck CheckPairs(const Prepared& p) {
  RegisterCheck r = NewerReturnedBefore(
      p.sets, p.sets, /*or_equal=*/true, Violation::kVersionBackwards,
      "a Set that began after another returned got a version not above it");
  if (!r.ok()) return r;
  r = NewerReturnedBefore(
      p.sets, p.hits, /*or_equal=*/false, Violation::kLostWrite,
      "a Get began after a newer Set returned and read an older value");
  if (!r.ok()) return r;
  r = NewerReturnedBefore(p.hits, p.hits, /*or_equal=*/false,
                          Violation::kStaleRead,
                          "a Get began after another Get returned a newer "
                          "value, and read an older one");
  if (!r.ok()) return r;
  // R4, a miss or Delete after the Set: the one invoked last among those
  // that returned before the Get began.
  SweepReturnedBefore(
      p.absents, Indexes(p.hits.size()), p.hits,
      [](const RegisterOp* a, const RegisterOp* b) {
        return a->invoke > b->invoke;
      },
      [&](size_t i, const RegisterOp* a) {
        const RegisterOp* set = p.sets[p.hit_epoch[i] - 1];
        if (r.ok() && a != nullptr && a->invoke > set->respond) {
          r = Fail(Violation::kStaleRead,
                   "a Get read a value that a miss or Delete begun after its "
                   "Set returned had already seen gone",
                   {set, a, p.hits[i]});
        }
      });
  if (!r.ok()) return r;
  // R5. Deletes that returned true, by invoke, with the running maximum of
  // their responds.
  std::vector<const RegisterOp*> removals = p.removals;
  std::sort(removals.begin(), removals.end(),
            [](auto* a, auto* b) { return a->invoke < b->invoke; });
  std::vector<const RegisterOp*> latest_respond(removals.size());
  for (size_t i = 0; i < removals.size(); ++i) {
    latest_respond[i] =
        i > 0 && latest_respond[i - 1]->respond > removals[i]->respond
            ? latest_respond[i - 1]
            : removals[i];
  }
  std::vector<const RegisterOp*> misses;
  for (const RegisterOp* a : p.absents) {
    if (IsMiss(*a)) misses.push_back(a);
  }
  std::unordered_map<const RegisterOp*, int> epoch_of_set;
  for (size_t i = 0; i < p.sets.size(); ++i) epoch_of_set[p.sets[i]] = i;
  SweepReturnedBefore(
      p.sets, Indexes(misses.size()), misses, HigherVersion,
      [&](size_t i, const RegisterOp* w) {
        if (!r.ok() || w == nullptr) return;
        const RegisterOp* m = misses[i];
        const size_t begun = std::partition_point(
            removals.begin(), removals.end(),
            [&](const RegisterOp* d) { return d->invoke < m->respond; }) -
            removals.begin();
        if (begun > 0 && latest_respond[begun - 1]->respond > w->invoke) {
          return;  // a Delete can remove w's value (or a later one) first
        }
        for (size_t e = epoch_of_set[w]; e < p.sets.size(); ++e) {
          if (p.sets[e]->invoke < m->respond &&
              p.expiry_from[e] < m->respond) {
            return;  // that value may have expired first
          }
        }
        r = Fail(Violation::kUnexplainedMiss,
                 "a miss began after a Set returned, and no Delete or expiry "
                 "can be placed between them",
                 {w, m});
      });
  return r;
}

// R6: just-in-time linearization over (epoch, present, linearized open ops).
struct Config {
  uint32_t epoch = 0;
  bool present = false;
  uint64_t done = 0;  // bit s: the op in slot s is linearized
  bool operator==(const Config& o) const {
    return epoch == o.epoch && present == o.present && done == o.done;
  }
};
struct ConfigHash {
  size_t operator()(const Config& c) const {
    return std::hash<uint64_t>()(c.done * 0x9e3779b97f4a7c15ull ^
                                 (uint64_t{c.epoch} << 1 | c.present));
  }
};
using ConfigSet = std::unordered_set<Config, ConfigHash>;

RegisterCheck Search(const std::vector<RegisterOp>& ops, const Prepared& p) {
  std::unordered_map<const RegisterOp*, uint32_t> epoch;
  for (size_t i = 0; i < p.sets.size(); ++i) epoch[p.sets[i]] = i + 1;
  for (size_t i = 0; i < p.hits.size(); ++i) epoch[p.hits[i]] = p.hit_epoch[i];
  struct Event {
    uint64_t tick;
    const RegisterOp* op;
    bool invoke;
  };
  std::vector<Event> events;
  for (const RegisterOp& op : ops) {
    if (op.kind == Kind::kAdvanceClock) continue;
    events.push_back({op.invoke, &op, true});
    events.push_back({op.respond, &op, false});
  }
  std::sort(events.begin(), events.end(),
            [](const Event& a, const Event& b) { return a.tick < b.tick; });

  const RegisterOp* slots[64] = {};
  std::unordered_map<const RegisterOp*, int> slot_of;
  ConfigSet configs{Config{}};
  // Whether `op` may take its point now in state `c`; the state after it.
  auto apply = [&](const RegisterOp& op, Config* c) {
    switch (op.kind) {
      case Kind::kSet:
        if (epoch[&op] != c->epoch + 1) return false;
        c->epoch += 1;
        c->present = true;
        return true;
      case Kind::kGet:
        return op.found ? c->present && epoch[&op] == c->epoch : !c->present;
      case Kind::kDelete:
        if (op.found != c->present) return false;
        c->present = false;
        return true;
      case Kind::kAdvanceClock:
        break;
    }
    return false;
  };
  for (const Event& e : events) {
    if (e.invoke) {
      int s = 0;
      while (s < 64 && slots[s] != nullptr) ++s;
      if (s == 64) {
        return Fail(Violation::kMalformed, "more than 64 ops open at once",
                    {e.op});
      }
      slots[s] = e.op;
      slot_of[e.op] = s;
      continue;
    }
    // Every state some linearization of the ops so far can reach, with the
    // open ops it has linearized: the closure of `configs` under taking the
    // point of an open op, or an expiry that the clock allows by now.
    std::vector<Config> work(configs.begin(), configs.end());
    ConfigSet seen(configs);
    while (!work.empty()) {
      const Config c = work.back();
      work.pop_back();
      auto add = [&](const Config& n) {
        if (seen.insert(n).second) work.push_back(n);
      };
      if (c.present && c.epoch > 0 && p.expiry_from[c.epoch - 1] < e.tick) {
        Config n = c;
        n.present = false;
        add(n);
      }
      for (int s = 0; s < 64; ++s) {
        if (slots[s] == nullptr || (c.done >> s & 1)) continue;
        Config n = c;
        if (apply(*slots[s], &n)) {
          n.done |= uint64_t{1} << s;
          add(n);
        }
      }
    }
    const int s = slot_of[e.op];
    ConfigSet next;
    for (Config c : seen) {
      if (!(c.done >> s & 1)) continue;
      c.done &= ~(uint64_t{1} << s);
      next.insert(c);
    }
    if (next.empty()) {
      std::string why = absl::StrCat(
          "no linearization of the ops so far can place this op; the states "
          "reachable before it returned were (epoch = the version rank of the "
          "last Set, present or absent):");
      for (const Config& c : configs) {
        absl::StrAppend(&why, " (", c.epoch, c.present ? ", present)" : ", absent)");
      }
      absl::StrAppend(&why, "; the ops open then:");
      RegisterCheck r = Fail(Violation::kNotLinearizable, why, {e.op});
      for (const RegisterOp* open : slots) {
        if (open != nullptr && open != e.op) {
          absl::StrAppend(&r.explanation, "\n  open: ", DescribeOp(*open));
        }
      }
      return r;
    }
    configs = std::move(next);
    slots[s] = nullptr;
  }
  return RegisterCheck{};
}

}  // namespace

const char* ViolationName(RegisterCheck::Violation v) {
  switch (v) {
    case Violation::kNone: return "none";
    case Violation::kMalformed: return "malformed history";
    case Violation::kNeverWritten: return "read of a value never written";
    case Violation::kVersionBackwards: return "version going backwards";
    case Violation::kLostWrite: return "lost write";
    case Violation::kStaleRead: return "stale read";
    case Violation::kUnexplainedMiss: return "miss with no delete or expiry";
    case Violation::kNotLinearizable: return "not linearizable";
  }
  return "?";
}

std::string DescribeOp(const RegisterOp& op) {
  std::string what;
  switch (op.kind) {
    case Kind::kSet:
      what = absl::StrCat("Set(", op.value, op.ttl_ms != 0 ? absl::StrCat(
                                                 ", ttl ", op.ttl_ms, " ms")
                                           : "",
                          ") -> version ", op.version);
      break;
    case Kind::kGet:
      what = op.found ? absl::StrCat("Get -> ", op.value, " version ",
                                     op.version)
                      : "Get -> miss";
      break;
    case Kind::kDelete:
      what = op.found ? "Delete -> deleted" : "Delete -> nothing to delete";
      break;
    case Kind::kAdvanceClock:
      what = absl::StrCat("AdvanceClock -> ", op.clock_ms, " ms");
      break;
  }
  return absl::StrCat("[", op.invoke, ", ", op.respond, "] thread ",
                      op.thread, ": ", what);
}

RegisterCheck CheckRegisterHistory(const std::vector<RegisterOp>& ops,
                                   uint64_t initial_clock_ms) {
  Prepared p;
  RegisterCheck r = Prepare(ops, initial_clock_ms, &p);
  if (!r.ok()) return r;
  r = CheckPairs(p);
  if (!r.ok()) return r;
  return Search(ops, p);
}

}  // namespace furrballs
