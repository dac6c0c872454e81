"""A client of several Furrballs servers that shards keys across them by
rendezvous hashing, the Python twin of clients/cpp/cluster_client.h.

Thread safety: a ClusterClient may be shared by threads. Calls,
set_endpoints() and resolve() may run concurrently; a call uses the member
set that was current when it started (one attribute load of an immutable
snapshot, atomic under the GIL). Close it once, when no call is running.

Ownership. A key belongs to the endpoint that rendezvous hashing
(furrballs_client.rendezvous) picks among the current members, exactly as the
C++ ClusterClient picks it: clients of either language with the same
``hash_seed`` and the same endpoint strings agree on every owner.

Membership. From a list of "host:port" endpoints, or from a target
("dns:///name:port" or "name:port") whose every A/AAAA record is a member,
e.g. the pods behind a Kubernetes headless Service. Resolved addresses are
written as the C++ client writes them ("10.0.0.7:50051", "[fd00::7]:50051"),
so both agree on owners when they resolve the same name. A DNS cluster
re-resolves every ``resolve_interval`` seconds on a background thread, and
soon after a call answers UNAVAILABLE (at most once per
``min_resolve_interval``: a dead pod makes many calls fail at once, and they
should cost one lookup). A resolution that fails or finds no address keeps
the previous members: a DNS hiccup must not empty the cache. Endpoints that
stay in the set keep their channel and down mark.

Failure policy, the C++ client's: a dead endpoint costs only its own keys.
The cache is not replicated, so a key is never sent anywhere but its owner.
  - Calls for keys of an unreachable endpoint raise UnavailableError; keys of
    every other endpoint are unaffected.
  - After an endpoint answers UNAVAILABLE it is marked down for
    ``down_interval`` seconds: its keys fail at once with UnavailableError,
    without a network round trip or a wait for the deadline. The first call
    after the interval goes to the network again; any answer from the server
    (even an error) clears the mark.
  - Keys are not re-homed while their owner is down: a stand-in would serve
    misses during the outage and stale values after it. Ownership changes
    only with the member set.
  - multi_get/multi_set split the batch by owner, send the parts in parallel
    and return one result per item in request order; the items of a failed
    part are that part's FurrballsError (returned, not raised).
"""
from __future__ import annotations

import dataclasses
import socket
import threading
import time
from typing import (Callable, Dict, Iterable, List, Optional, Sequence, Tuple, TypeVar,
                    Union)

import grpc

from .client import (Client, Entry, FurrballsError, InvalidArgumentError, Key, NodeStats,
                     NotFoundError, SetItem, UnavailableError, Value, _multi_get_answer,
                     _multi_get_request, _multi_set_answer, _multi_set_request, _node_stats)
from .rendezvous import Rendezvous
from .v1 import furrballs_pb2 as pb

# Turns "host:port" into endpoint strings; raises FurrballsError on failure.
Resolver = Callable[[str, int], List[str]]

_T = TypeVar("_T")


def _split_host_port(host_port: str) -> Tuple[str, str]:
    """"host:port" or "[v6]:port", as the C++ client splits them."""
    if host_port.startswith("["):
        close = host_port.find("]")
        if close < 0 or host_port[close + 1:close + 2] != ":":
            raise InvalidArgumentError(grpc.StatusCode.INVALID_ARGUMENT,
                                       f"'{host_port}': expected [address]:port")
        host, port = host_port[1:close], host_port[close + 2:]
    else:
        host, sep, port = host_port.rpartition(":")
        if not sep:
            raise InvalidArgumentError(grpc.StatusCode.INVALID_ARGUMENT,
                                       f"'{host_port}': expected host:port")
    if not host or not port:
        raise InvalidArgumentError(grpc.StatusCode.INVALID_ARGUMENT,
                                   f"'{host_port}': empty host or port")
    return host, port


def resolve_with_getaddrinfo(host_port: str, family: int = socket.AF_UNSPEC) -> List[str]:
    """Every distinct address ``host_port`` resolves to (socket.getaddrinfo,
    all A/AAAA records of ``family``), formatted as endpoints and sorted.

    Raises UnavailableError when the lookup may succeed later (EAI_AGAIN),
    NotFoundError for a name with no address, InvalidArgumentError for a
    malformed ``host_port``.
    """
    host, port = _split_host_port(host_port)
    try:
        infos = socket.getaddrinfo(host, port, family, socket.SOCK_STREAM)
    except socket.gaierror as e:
        why = f"resolving '{host_port}': {e.strerror}"
        if e.errno == socket.EAI_AGAIN:
            raise UnavailableError(grpc.StatusCode.UNAVAILABLE, why) from None
        raise NotFoundError(grpc.StatusCode.NOT_FOUND, why) from None
    out = set()
    for fam, _, _, _, sockaddr in infos:
        if fam == socket.AF_INET:
            out.add(f"{sockaddr[0]}:{sockaddr[1]}")
        elif fam == socket.AF_INET6:
            # The C++ client formats with inet_ntop, which has no zone
            # ("%eth0"); round-trip to get the same canonical text.
            ip = sockaddr[0].split("%", 1)[0]
            ip = socket.inet_ntop(socket.AF_INET6, socket.inet_pton(socket.AF_INET6, ip))
            out.add(f"[{ip}]:{sockaddr[1]}")
    if not out:
        raise NotFoundError(grpc.StatusCode.NOT_FOUND, f"resolving '{host_port}': no address")
    return sorted(out)


def _dns_host_port(target: str) -> str:
    """The "name:port" of a "dns:///name:port", "dns:name:port" or
    "name:port" target. A DNS authority ("dns://8.8.8.8/...") is not
    supported: getaddrinfo asks the system's resolver."""
    if not target.startswith("dns:"):
        return target
    rest = target[len("dns:"):]
    if rest.startswith("//"):
        authority, _, rest = rest[2:].partition("/")
        if authority:
            raise ValueError(f"'{target}': a DNS authority is not supported")
    return rest


@dataclasses.dataclass(frozen=True)
class EndpointStats:
    """One endpoint's per-node statistics, or why they could not be read."""

    endpoint: str
    nodes: Union[List[NodeStats], FurrballsError]


class _Endpoint:
    """One member: its Client and its down mark."""

    def __init__(self, address: str, client: Client) -> None:
        self.address = address
        self.client = client
        # time.monotonic() until which the endpoint is skipped; 0 when up. A
        # plain attribute: a stale read only sends or skips one extra call.
        self.down_until = 0.0


@dataclasses.dataclass(frozen=True)
class _Members:
    """An immutable member set; endpoints[i] is ring.endpoints[i]."""

    ring: Rendezvous
    endpoints: Tuple[_Endpoint, ...]


class ClusterClient:
    """A sharding client of a Furrballs cluster.

    ``target`` is either a sequence of "host:port" endpoints (order and
    duplicates do not matter) or one DNS target string ("dns:///name:port"
    or "name:port"), resolved at once (raising if that fails) and again as
    the module docstring says.

    Per-endpoint Client settings: ``timeout`` (seconds, the default deadline;
    every method takes ``timeout=``), ``credentials``, ``tls_server_name``
    (resolved endpoints are addresses; certificates usually name the
    Service's DNS names), ``token``, ``max_message_bytes``,
    ``max_reconnect_backoff``, ``batch_streams`` (automatic batching, see
    Client). Cluster settings:
      hash_seed: rendezvous seed, unsigned 64-bit; every client of a cluster
        (C++ ClusterOptions::hash_seed included) must use the same one.
      down_interval: seconds an endpoint that answered UNAVAILABLE is
        skipped; 0 sends every call to the network.
      resolve_interval: DNS clusters, seconds between background
        re-resolutions; 0 means only after UNAVAILABLE and on resolve().
      min_resolve_interval: DNS clusters, the least time between two
        background resolutions.
      family: socket.AF_UNSPEC (A and AAAA), AF_INET or AF_INET6.
      resolver: replaces resolve_with_getaddrinfo (tests, service discovery).
    """

    def __init__(self, target: Union[str, Sequence[str]], *, timeout: float = 5.0,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 tls_server_name: Optional[str] = None, token: Optional[str] = None,
                 max_message_bytes: int = 16 << 20, max_reconnect_backoff: float = 1.0,
                 hash_seed: int = 0, down_interval: float = 1.0,
                 resolve_interval: float = 10.0, min_resolve_interval: float = 1.0,
                 family: int = socket.AF_UNSPEC,
                 resolver: Optional[Resolver] = None,
                 batch_streams: int = 1) -> None:
        self._new_client = lambda address: Client(
            address, timeout=timeout, credentials=credentials,
            max_message_bytes=max_message_bytes,
            max_reconnect_backoff=max_reconnect_backoff, token=token,
            tls_server_name=tls_server_name, batch_streams=batch_streams)
        self.hash_seed = hash_seed
        self.down_interval = down_interval
        self._resolve_interval = resolve_interval
        self._min_resolve_interval = min_resolve_interval
        self._family = family
        self._resolver: Resolver = resolver or resolve_with_getaddrinfo
        self._lock = threading.Lock()  # serializes member-set changes
        self._members: Optional[_Members] = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # asks the resolver thread for a resolution
        self._thread: Optional[threading.Thread] = None
        if isinstance(target, str):
            self._dns_name: Optional[str] = _dns_host_port(target)
            self.resolve()
            self._thread = threading.Thread(target=self._resolve_loop,
                                            name="furrballs-resolve", daemon=True)
            self._thread.start()
        else:
            self._dns_name = None
            self.set_endpoints(target)

    def close(self) -> None:
        """Stops re-resolution and closes every member's channel."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        for e in self._snapshot().endpoints:
            e.client.close()

    def __enter__(self) -> "ClusterClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- Membership.

    def set_endpoints(self, endpoints: Iterable[str]) -> None:
        """Replaces the member set; ValueError (and no change) if it is empty
        or has an empty endpoint. A member that leaves is dropped; its channel
        closes once no running call holds it."""
        endpoints = list(endpoints)
        if not endpoints:
            raise ValueError("a cluster needs at least one endpoint")
        if any(not e for e in endpoints):
            raise ValueError("empty endpoint")
        ring = Rendezvous(endpoints, self.hash_seed)
        with self._lock:
            old: Dict[str, _Endpoint] = {}
            if self._members is not None:
                old = {e.address: e for e in self._members.endpoints}
            self._members = _Members(ring, tuple(
                old.get(a) or _Endpoint(a, self._new_client(a)) for a in ring.endpoints))

    def resolve(self) -> List[str]:
        """DNS clusters: resolves the name now, applies and returns the
        members. A failure raises (FurrballsError) and keeps the previous
        members; FAILED_PRECONDITION for a cluster made from a list."""
        if self._dns_name is None:
            raise FurrballsError(grpc.StatusCode.FAILED_PRECONDITION,
                                 "resolve: this cluster was made from a list of endpoints")
        found = self._resolver(self._dns_name, self._family)
        if not found:
            raise NotFoundError(grpc.StatusCode.NOT_FOUND,
                                f"resolving '{self._dns_name}': no address")
        self.set_endpoints(found)
        return list(self.endpoints)

    def _resolve_loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._resolve_interval or None)
            if self._stop.is_set():
                return
            self._wake.clear()
            try:
                self.resolve()
            except (FurrballsError, OSError):
                pass  # keeps the previous members; the next round tries again
            # The rate limit: requests made during this pause leave _wake set
            # and together cause one resolution after it.
            self._stop.wait(self._min_resolve_interval)

    @property
    def endpoints(self) -> Tuple[str, ...]:
        """The current members, sorted."""
        return self._snapshot().ring.endpoints

    def owner_of(self, key: Key) -> str:
        """The endpoint that owns ``key`` in the current member set."""
        return self._snapshot().ring.owner_endpoint(key)

    def wait_for_ready(self, timeout: float) -> None:
        """Connects to every member and waits up to ``timeout`` seconds in
        all; clears the down mark of the ready ones. UnavailableError naming
        the members that were not ready."""
        deadline = time.monotonic() + timeout
        not_ready = []
        for e in self._snapshot().endpoints:
            if e.client.wait_for_ready(max(0.0, deadline - time.monotonic())):
                e.down_until = 0.0
            else:
                not_ready.append(e.address)
        if not_ready:
            raise UnavailableError(grpc.StatusCode.UNAVAILABLE,
                                   f"not ready within {timeout} s: {', '.join(not_ready)}")

    # ---- Calls. See Client for each method's meaning.

    def get(self, key: Key, timeout: Optional[float] = None) -> Optional[Entry]:
        return self._on_owner(key, lambda c: c.get(key, timeout=timeout))

    def set(self, key: Key, value: Value, ttl_ms: int = 0, if_absent: bool = False,
            if_version: Optional[int] = None, timeout: Optional[float] = None) -> int:
        return self._on_owner(key, lambda c: c.set(key, value, ttl_ms=ttl_ms,
                                                   if_absent=if_absent,
                                                   if_version=if_version, timeout=timeout))

    def delete(self, key: Key, timeout: Optional[float] = None) -> bool:
        return self._on_owner(key, lambda c: c.delete(key, timeout=timeout))

    def touch(self, key: Key, ttl_ms: int, timeout: Optional[float] = None) -> None:
        self._on_owner(key, lambda c: c.touch(key, ttl_ms, timeout=timeout))

    def multi_get(self, keys: Sequence[Key], timeout: Optional[float] = None
                  ) -> List[Union[Optional[Entry], FurrballsError]]:
        """One result per key, in request order: the Entry, None for a miss,
        or the FurrballsError of the key (its own, or its owner's)."""
        return self._scatter(
            keys, keys, "MultiGet",
            _multi_get_request, _multi_get_answer, timeout)

    def multi_set(self, items: Sequence[SetItem], timeout: Optional[float] = None
                  ) -> List[Union[int, FurrballsError]]:
        """One result per item, in request order: the new version, or the
        FurrballsError of the item (its own, or its owner's)."""
        return self._scatter(
            [i.key for i in items], items, "MultiSet",
            _multi_set_request, _multi_set_answer, timeout)

    def stats(self, timeout: Optional[float] = None) -> List[EndpointStats]:
        """Every member's statistics, in endpoints order, asked in parallel."""
        m = self._snapshot()
        calls = [(e, e.client._start("Stats", pb.StatsRequest(), timeout)) for e in m.endpoints]
        out = []
        for e, call in calls:
            try:
                nodes: Union[List[NodeStats], FurrballsError] = _node_stats(
                    Client._finish("Stats", call))
                self._observe(e, None)
            except FurrballsError as err:
                self._observe(e, err)
                nodes = err
            out.append(EndpointStats(e.address, nodes))
        return out

    # ---- Routing and the down mark.

    def _snapshot(self) -> _Members:
        m = self._members
        assert m is not None  # set before __init__ returns
        return m

    def _down_error(self, e: _Endpoint) -> Optional[UnavailableError]:
        until = e.down_until
        now = time.monotonic()
        if until == 0.0 or now >= until:
            return None
        return UnavailableError(
            grpc.StatusCode.UNAVAILABLE,
            f"{e.address} is marked down for {int((until - now) * 1000)} ms more "
            "after answering UNAVAILABLE")

    def _observe(self, e: _Endpoint, err: Optional[FurrballsError]) -> None:
        """Records a call's outcome in the endpoint's down mark."""
        if err is not None and err.code is grpc.StatusCode.UNAVAILABLE:
            if self.down_interval > 0:
                e.down_until = time.monotonic() + self.down_interval
            if self._dns_name is not None:
                self._wake.set()  # the member may be gone: look again (rate limited)
        elif e.down_until != 0.0:
            e.down_until = 0.0

    def _on_owner(self, key: Key, call: Callable[[Client], _T]) -> _T:
        m = self._snapshot()
        e = m.endpoints[m.ring.owner(key)]
        down = self._down_error(e)
        if down is not None:
            raise down
        try:
            result = call(e.client)
        except FurrballsError as err:
            self._observe(e, err)
            raise
        self._observe(e, None)
        return result

    def _scatter(self, keys: Sequence[Key], items: Sequence, method: str,
                 request: Callable[[list], object], answer: Callable[[object, int], list],
                 timeout: Optional[float]) -> list:
        """Splits ``items`` by the owner of ``keys`` (keys[i] is items[i]'s
        key), sends the parts in parallel and reassembles the answers."""
        m = self._snapshot()
        parts: Dict[int, List[int]] = {}
        for i, k in enumerate(keys):
            parts.setdefault(m.ring.owner(k), []).append(i)
        out: list = [None] * len(items)
        sent = []
        for owner, slots in parts.items():
            e = m.endpoints[owner]
            down = self._down_error(e)
            if down is not None:
                for s in slots:
                    out[s] = down
                continue
            req = request([items[s] for s in slots])
            sent.append((e, slots, e.client._start(method, req, timeout)))
        for e, slots, call in sent:
            try:
                results = answer(Client._finish(method, call), len(slots))
            except FurrballsError as err:
                self._observe(e, err)
                for s in slots:
                    out[s] = err
                continue
            self._observe(e, None)
            for s, r in zip(slots, results):
                out[s] = r
        return out
