// clients/cpp/cluster_client.cc: see cluster_client.h.
#include "clients/cpp/cluster_client.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <utility>

#include <absl/strings/str_cat.h>
#include <absl/strings/str_join.h>
#include <absl/synchronization/blocking_counter.h>
#include <absl/time/time.h>

namespace furrballs::client {
namespace {

int64_t SteadyNowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Splits "host:port" or "[v6]:port".
absl::Status SplitHostPort(const std::string& host_port, std::string* host,
                           std::string* port) {
  if (!host_port.empty() && host_port.front() == '[') {
    const size_t close = host_port.find(']');
    if (close == std::string::npos || close + 1 >= host_port.size() ||
        host_port[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("'", host_port, "': expected [address]:port"));
    }
    *host = host_port.substr(1, close - 1);
    *port = host_port.substr(close + 2);
  } else {
    const size_t colon = host_port.rfind(':');
    if (colon == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", host_port, "': expected host:port"));
    }
    *host = host_port.substr(0, colon);
    *port = host_port.substr(colon + 1);
  }
  if (host->empty() || port->empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", host_port, "': empty host or port"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ResolveWithGetaddrinfo(
    const std::string& host_port, AddressFamily family) {
  std::string host, port;
  if (absl::Status s = SplitHostPort(host_port, &host, &port); !s.ok()) {
    return s;
  }
  addrinfo hints{};
  hints.ai_family = family == AddressFamily::kIPv4   ? AF_INET
                    : family == AddressFamily::kIPv6 ? AF_INET6
                                                     : AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* result = nullptr;
  const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &result);
  if (rc != 0) {
    // EAI_AGAIN is the retryable kind; everything else is a bad name.
    const std::string why =
        absl::StrCat("resolving '", host_port, "': ", gai_strerror(rc));
    return rc == EAI_AGAIN ? absl::UnavailableError(why)
                           : absl::NotFoundError(why);
  }
  std::vector<std::string> out;
  for (addrinfo* a = result; a != nullptr; a = a->ai_next) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      const auto* in = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
      inet_ntop(AF_INET, &in->sin_addr, buf, sizeof(buf));
      out.push_back(absl::StrCat(buf, ":", ntohs(in->sin_port)));
    } else if (a->ai_family == AF_INET6) {
      const auto* in6 = reinterpret_cast<const sockaddr_in6*>(a->ai_addr);
      inet_ntop(AF_INET6, &in6->sin6_addr, buf, sizeof(buf));
      out.push_back(absl::StrCat("[", buf, "]:", ntohs(in6->sin6_port)));
    }
  }
  freeaddrinfo(result);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  if (out.empty()) {
    return absl::NotFoundError(
        absl::StrCat("resolving '", host_port, "': no address"));
  }
  return out;
}

ClusterClient::ClusterClient(ClusterOptions options, std::string dns_name)
    : options_(std::move(options)), dns_name_(std::move(dns_name)) {}

absl::StatusOr<std::unique_ptr<ClusterClient>> ClusterClient::FromEndpoints(
    std::vector<std::string> endpoints, ClusterOptions options) {
  std::unique_ptr<ClusterClient> c(new ClusterClient(std::move(options), ""));
  if (absl::Status s = c->SetEndpoints(std::move(endpoints)); !s.ok()) {
    return s;
  }
  return c;
}

absl::StatusOr<std::unique_ptr<ClusterClient>> ClusterClient::FromDns(
    std::string host_port, ClusterOptions options) {
  if (!options.resolver) options.resolver = ResolveWithGetaddrinfo;
  std::unique_ptr<ClusterClient> c(
      new ClusterClient(std::move(options), std::move(host_port)));
  if (absl::Status s = c->Resolve(); !s.ok()) return s;
  if (c->options_.resolve_interval.count() > 0) {
    c->resolver_thread_ = std::thread([raw = c.get()] { raw->ResolveLoop(); });
  }
  return c;
}

ClusterClient::~ClusterClient() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (resolver_thread_.joinable()) resolver_thread_.join();
}

void ClusterClient::ResolveLoop() {
  const absl::Duration interval = absl::FromChrono(options_.resolve_interval);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      // Returns early (true) only when the destructor asks to stop.
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), interval)) return;
    }
    // A failure keeps the previous members (see the header); the next period
    // tries again, so there is nothing more to do with the error here.
    Resolve().IgnoreError();
  }
}

absl::Status ClusterClient::Resolve() {
  if (dns_name_.empty()) {
    return absl::FailedPreconditionError(
        "Resolve: this cluster was made from a list of endpoints");
  }
  absl::StatusOr<std::vector<std::string>> found =
      options_.resolver(dns_name_, options_.address_family);
  if (!found.ok()) return found.status();
  return SetEndpoints(*std::move(found));
}

absl::Status ClusterClient::SetEndpoints(std::vector<std::string> endpoints) {
  if (endpoints.empty()) {
    return absl::InvalidArgumentError("a cluster needs at least one endpoint");
  }
  for (const std::string& e : endpoints) {
    if (e.empty()) return absl::InvalidArgumentError("empty endpoint");
  }
  auto next = std::make_shared<Members>(
      Members{Rendezvous(std::move(endpoints), options_.hash_seed), {}});
  absl::MutexLock lock(&mu_);
  // Endpoints that stay keep their Client (connection and down mark).
  absl::flat_hash_map<std::string, std::shared_ptr<Endpoint>> old;
  if (members_ != nullptr) {
    for (const auto& e : members_->endpoints) old.emplace(e->address, e);
  }
  for (const std::string& address : next->ring.endpoints()) {
    auto it = old.find(address);
    next->endpoints.push_back(
        it != old.end() ? it->second
                        : std::make_shared<Endpoint>(address, options_.client));
  }
  members_ = std::move(next);
  return absl::OkStatus();
}

std::shared_ptr<const ClusterClient::Members> ClusterClient::members() const {
  absl::MutexLock lock(&mu_);
  return members_;
}

absl::Status ClusterClient::WaitForReady(std::chrono::milliseconds timeout) {
  std::shared_ptr<const Members> m = members();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::vector<std::string> not_ready;
  for (const std::shared_ptr<Endpoint>& e : m->endpoints) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (e->client.WaitForReady(std::max(left, std::chrono::milliseconds(0)))
            .ok()) {
      e->down_until_ns.store(0, std::memory_order_relaxed);
    } else {
      not_ready.push_back(e->address);
    }
  }
  if (not_ready.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "not ready within ", timeout.count(), " ms: ",
      absl::StrJoin(not_ready, ", ")));
}

std::vector<std::string> ClusterClient::endpoints() const {
  return members()->ring.endpoints();
}

std::string ClusterClient::OwnerOf(absl::string_view key) const {
  std::shared_ptr<const Members> m = members();
  return m->ring.endpoints()[m->ring.Owner(key)];
}

absl::Status ClusterClient::CheckUp(Endpoint* e) const {
  const int64_t until = e->down_until_ns.load(std::memory_order_relaxed);
  if (until == 0 || SteadyNowNs() >= until) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      e->address, " is marked down for ", (until - SteadyNowNs()) / 1000000,
      " ms more after answering UNAVAILABLE"));
}

void ClusterClient::Observe(Endpoint* e, const absl::Status& status) const {
  if (absl::IsUnavailable(status)) {
    if (options_.down_interval.count() > 0) {
      e->down_until_ns.store(
          SteadyNowNs() +
              std::chrono::duration_cast<std::chrono::nanoseconds>(
                  options_.down_interval)
                  .count(),
          std::memory_order_relaxed);
    }
  } else if (e->down_until_ns.load(std::memory_order_relaxed) != 0) {
    // Any answer from the server, even an error, shows it is reachable.
    e->down_until_ns.store(0, std::memory_order_relaxed);
  }
}

absl::StatusOr<ClusterClient::Endpoint*> ClusterClient::Route(
    const Members& m, absl::string_view key) const {
  Endpoint* e = m.endpoints[m.ring.Owner(key)].get();
  if (absl::Status s = CheckUp(e); !s.ok()) return s;
  return e;
}

absl::StatusOr<std::optional<Entry>> ClusterClient::Get(
    absl::string_view key, const CallOptions& call) {
  std::shared_ptr<const Members> m = members();
  absl::StatusOr<Endpoint*> e = Route(*m, key);
  if (!e.ok()) return e.status();
  absl::StatusOr<std::optional<Entry>> r = (*e)->client.Get(key, call);
  Observe(*e, r.status());
  return r;
}

absl::StatusOr<uint64_t> ClusterClient::Set(absl::string_view key,
                                            absl::string_view value,
                                            const SetOptions& options,
                                            const CallOptions& call) {
  std::shared_ptr<const Members> m = members();
  absl::StatusOr<Endpoint*> e = Route(*m, key);
  if (!e.ok()) return e.status();
  absl::StatusOr<uint64_t> r = (*e)->client.Set(key, value, options, call);
  Observe(*e, r.status());
  return r;
}

absl::StatusOr<bool> ClusterClient::Delete(absl::string_view key,
                                           const CallOptions& call) {
  std::shared_ptr<const Members> m = members();
  absl::StatusOr<Endpoint*> e = Route(*m, key);
  if (!e.ok()) return e.status();
  absl::StatusOr<bool> r = (*e)->client.Delete(key, call);
  Observe(*e, r.status());
  return r;
}

absl::Status ClusterClient::Touch(absl::string_view key, uint64_t ttl_ms,
                                  const CallOptions& call) {
  std::shared_ptr<const Members> m = members();
  absl::StatusOr<Endpoint*> e = Route(*m, key);
  if (!e.ok()) return e.status();
  absl::Status r = (*e)->client.Touch(key, ttl_ms, call);
  Observe(*e, r);
  return r;
}

std::vector<absl::StatusOr<std::optional<Entry>>> ClusterClient::MultiGet(
    absl::Span<const std::string> keys, const CallOptions& call) {
  std::shared_ptr<const Members> m = members();
  const size_t n = m->endpoints.size();
  // Per owner: the keys it gets and where each answer goes.
  std::vector<std::vector<std::string>> part_keys(n);
  std::vector<std::vector<size_t>> part_slots(n);
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t owner = m->ring.Owner(keys[i]);
    part_keys[owner].push_back(keys[i]);
    part_slots[owner].push_back(i);
  }
  std::vector<absl::StatusOr<std::optional<Entry>>> out(keys.size());
  std::vector<size_t> live;
  for (size_t o = 0; o < n; ++o) {
    if (part_keys[o].empty()) continue;
    if (absl::Status s = CheckUp(m->endpoints[o].get()); !s.ok()) {
      for (size_t slot : part_slots[o]) out[slot] = s;
      continue;
    }
    live.push_back(o);
  }
  // Each callback writes only its own part's slots; the counter's Wait
  // orders those writes before the reads below.
  absl::BlockingCounter pending(static_cast<int>(live.size()));
  for (size_t o : live) {
    Endpoint* e = m->endpoints[o].get();
    const std::vector<size_t>* slots = &part_slots[o];
    e->client.MultiGetAsync(
        part_keys[o],
        [this, e, slots, &out, &pending](
            absl::StatusOr<std::vector<absl::StatusOr<std::optional<Entry>>>>
                r) {
          Observe(e, r.status());
          for (size_t j = 0; j < slots->size(); ++j) {
            if (r.ok()) {
              out[(*slots)[j]] = std::move((*r)[j]);
            } else {
              out[(*slots)[j]] = r.status();
            }
          }
          pending.DecrementCount();
        },
        call);
  }
  pending.Wait();
  return out;
}

std::vector<absl::StatusOr<uint64_t>> ClusterClient::MultiSet(
    absl::Span<const SetItem> items, const CallOptions& call) {
  std::shared_ptr<const Members> m = members();
  const size_t n = m->endpoints.size();
  std::vector<std::vector<SetItem>> part_items(n);
  std::vector<std::vector<size_t>> part_slots(n);
  for (size_t i = 0; i < items.size(); ++i) {
    const size_t owner = m->ring.Owner(items[i].key);
    part_items[owner].push_back(items[i]);
    part_slots[owner].push_back(i);
  }
  std::vector<absl::StatusOr<uint64_t>> out(items.size());
  std::vector<size_t> live;
  for (size_t o = 0; o < n; ++o) {
    if (part_items[o].empty()) continue;
    if (absl::Status s = CheckUp(m->endpoints[o].get()); !s.ok()) {
      for (size_t slot : part_slots[o]) out[slot] = s;
      continue;
    }
    live.push_back(o);
  }
  absl::BlockingCounter pending(static_cast<int>(live.size()));
  for (size_t o : live) {
    Endpoint* e = m->endpoints[o].get();
    const std::vector<size_t>* slots = &part_slots[o];
    e->client.MultiSetAsync(
        part_items[o],
        [this, e, slots, &out, &pending](
            absl::StatusOr<std::vector<absl::StatusOr<uint64_t>>> r) {
          Observe(e, r.status());
          for (size_t j = 0; j < slots->size(); ++j) {
            if (r.ok()) {
              out[(*slots)[j]] = std::move((*r)[j]);
            } else {
              out[(*slots)[j]] = r.status();
            }
          }
          pending.DecrementCount();
        },
        call);
  }
  pending.Wait();
  return out;
}

std::vector<EndpointStats> ClusterClient::Stats(const CallOptions& call) {
  std::shared_ptr<const Members> m = members();
  std::vector<EndpointStats> out;
  for (const std::shared_ptr<Endpoint>& e : m->endpoints) {
    absl::StatusOr<std::vector<NodeStats>> s = e->client.Stats(call);
    Observe(e.get(), s.status());
    out.push_back(EndpointStats{e->address, std::move(s)});
  }
  return out;
}

}  // namespace furrballs::client
