"""A thin, typed wrapper over the generated furrballs.v1 stubs.

Thread safety: a Client may be shared by threads (gRPC channels are
thread-safe); close it once, when no call is running.

A miss is not an error: get() returns None and delete() returns False. Every
failure raises a FurrballsError whose ``code`` is the grpc.StatusCode the
server (or the channel) gave; the codes the API contract names have their own
subclasses so callers can catch exactly the case they handle.
"""
from __future__ import annotations

import dataclasses
from typing import Iterable, List, Optional, Sequence, Union

import grpc

from .batcher import Batcher
from .errors import (  # noqa: F401 (re-exported: the package's public names)
    AbortedError,
    AlreadyExistsError,
    DeadlineExceededError,
    FurrballsError,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    UnauthenticatedError,
    UnavailableError,
    error_for,
    error_from_number,
)
from .v1 import furrballs_pb2 as pb
from .v1 import furrballs_pb2_grpc as pb_grpc

Key = Union[str, bytes]
Value = Union[str, bytes]


@dataclasses.dataclass(frozen=True)
class Entry:
    """One cached value as a read returns it."""

    value: bytes
    version: int
    # Milliseconds until expiry; 0 when the entry has no TTL.
    ttl_remaining_ms: int


@dataclasses.dataclass(frozen=True)
class SetItem:
    """One write of a multi_set(); the same options as set()."""

    key: Key
    value: Value
    ttl_ms: int = 0
    if_absent: bool = False
    if_version: Optional[int] = None


@dataclasses.dataclass(frozen=True)
class NodeStats:
    """One NUMA node's figures, summed since the server started."""

    node: int
    hits_local: int
    hits_remote: int
    misses: int
    sets: int
    deletes: int
    evictions: int
    expirations: int
    live_keys: int
    live_bytes: int
    memory_limit_bytes: int


def _bytes(x: Union[str, bytes]) -> bytes:
    return x.encode("utf-8") if isinstance(x, str) else bytes(x)


def _entry(r: pb.GetResponse) -> Optional[Entry]:
    if not r.found:
        return None
    return Entry(value=r.value, version=r.version, ttl_remaining_ms=r.ttl_remaining_ms)


def _set_request(key: Key, value: Value, ttl_ms: int, if_absent: bool,
                 if_version: Optional[int]) -> pb.SetRequest:
    if if_absent and if_version is not None:
        raise ValueError("if_absent and if_version are mutually exclusive")
    req = pb.SetRequest(key=_bytes(key), value=_bytes(value), ttl_ms=ttl_ms)
    if if_absent:
        req.mode = pb.SET_IF_ABSENT
    elif if_version is not None:
        req.mode = pb.SET_IF_VERSION
        req.expected_version = if_version
    return req


def _multi_get_request(keys: Sequence[Key]) -> pb.MultiGetRequest:
    return pb.MultiGetRequest(keys=[_bytes(k) for k in keys])


def _multi_get_answer(resp: pb.MultiGetResponse,
                      n: int) -> List[Union[Optional[Entry], FurrballsError]]:
    if len(resp.results) != n:
        raise FurrballsError(grpc.StatusCode.INTERNAL,
                             f"{len(resp.results)} results for {n} keys", "MultiGet")
    return [_entry(r) if r.code == 0 else error_from_number(r.code, r.message, "MultiGet")
            for r in resp.results]


def _multi_set_request(items: Iterable[SetItem]) -> pb.MultiSetRequest:
    return pb.MultiSetRequest(items=[
        _set_request(i.key, i.value, i.ttl_ms, i.if_absent, i.if_version) for i in items])


def _multi_set_answer(resp: pb.MultiSetResponse, n: int) -> List[Union[int, FurrballsError]]:
    if len(resp.results) != n:
        raise FurrballsError(grpc.StatusCode.INTERNAL,
                             f"{len(resp.results)} results for {n} items", "MultiSet")
    return [r.version if r.code == 0 else error_from_number(r.code, r.message, "MultiSet")
            for r in resp.results]


def _node_stats(resp: pb.StatsResponse) -> List[NodeStats]:
    return [NodeStats(**{f.name: getattr(n, f.name) for f in dataclasses.fields(NodeStats)})
            for n in resp.nodes]


def tls_credentials(ca_file: Optional[str] = None, cert_file: Optional[str] = None,
                    key_file: Optional[str] = None) -> grpc.ChannelCredentials:
    """TLS channel credentials from PEM files, for ``credentials=``.

    ``ca_file``: the CAs that may sign the server's certificate (None: the
    system's roots). ``cert_file`` and ``key_file``: the client's certificate
    chain and unencrypted key, for a server with mTLS (both or neither). The
    files are read once.
    """
    if (cert_file is None) != (key_file is None):
        raise ValueError("a client certificate needs its key and a key its certificate")

    def read(path: Optional[str]) -> Optional[bytes]:
        if path is None:
            return None
        with open(path, "rb") as f:
            return f.read()

    return grpc.ssl_channel_credentials(root_certificates=read(ca_file),
                                        private_key=read(key_file),
                                        certificate_chain=read(cert_file))


class Client:
    """A client of one Furrballs server.

    ``target`` is "host:port" (or any gRPC target). ``timeout`` is the default
    deadline of each call in seconds; every method takes ``timeout=`` to
    override it (zero or less fails at once with DeadlineExceededError).
    ``credentials`` selects TLS (None means plaintext; see
    tls_credentials()); ``tls_server_name`` is the name the server's
    certificate must carry when it is not the target's host (say, a pod IP
    target and a certificate for the Service's DNS names). ``token`` is sent
    as "authorization: Bearer <token>" with every call, for a server with
    --auth_token_file. ``max_reconnect_backoff`` (seconds) caps gRPC's
    reconnection backoff (120 s by default in gRPC), so a restarted server is
    used again within about that long, as with the C++ client.

    Automatic batching (furrballs_client/batcher.py): get, set, delete and
    touch calls that threads make concurrently through one Client travel as
    operations of Batch messages on ``batch_streams`` streams (default 1; 0
    sends every call unary); while one message is in flight the next fills,
    with no timer. A call that finds no other in flight goes unary, so a
    lone caller pays nothing for it (``batch_lone_calls=True`` batches it
    too). Results, errors and deadlines are those of the unary calls: a get
    whose value did not fit its Batch answer (the server's
    --max_response_bytes) is sent again alone within its deadline.
    """

    def __init__(self, target: str, timeout: float = 5.0,
                 credentials: Optional[grpc.ChannelCredentials] = None,
                 max_message_bytes: int = 16 << 20,
                 max_reconnect_backoff: float = 1.0,
                 token: Optional[str] = None,
                 tls_server_name: Optional[str] = None,
                 batch_streams: int = 1,
                 batch_lone_calls: bool = False) -> None:
        backoff_ms = max(1, int(max_reconnect_backoff * 1000))
        options = [
            ("grpc.max_receive_message_length", max_message_bytes),
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_reconnect_backoff_ms", backoff_ms),
            ("grpc.initial_reconnect_backoff_ms", min(backoff_ms, 1000)),
        ]
        if tls_server_name:
            options.append(("grpc.ssl_target_name_override", tls_server_name))
        if credentials is None:
            self._channel = grpc.insecure_channel(target, options=options)
        else:
            self._channel = grpc.secure_channel(target, credentials, options=options)
        self._stub = pb_grpc.CacheStub(self._channel)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.target = target
        self.timeout = timeout
        self._batcher = (Batcher(self._stub, self._metadata, batch_streams, batch_lone_calls)
                         if batch_streams > 0 else None)

    def close(self) -> None:
        if self._batcher is not None:
            self._batcher.close()
        self._channel.close()
        if self._batcher is not None:
            # The channel's close cancelled what the half-close left open.
            self._batcher.join(timeout=5.0)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def wait_for_ready(self, timeout: float) -> bool:
        """Connects and waits up to ``timeout`` seconds for the channel to be
        ready; False if it is not."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
            return True
        except grpc.FutureTimeoutError:
            return False

    def _timeout(self, method: str, timeout: Optional[float]) -> float:
        """The call's timeout in seconds. Zero or less is already expired, as
        in the C++ client: gRPC would sometimes still answer such a call."""
        t = self.timeout if timeout is None else timeout
        if t <= 0:
            raise error_for(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", method)
        return t

    def _call(self, method: str, request, timeout: Optional[float]):
        t = self._timeout(method, timeout)
        try:
            return getattr(self._stub, method)(request, timeout=t, metadata=self._metadata)
        except grpc.RpcError as e:  # every RpcError raised by a call is a grpc.Call
            raise error_for(e.code(), e.details() or "", method) from None

    def _single(self, method: str, field: str, request, timeout: Optional[float]):
        """A get, set, delete or touch: unary, or batched (see the class)."""
        if self._batcher is None:
            return self._call(method, request, timeout)
        return self._batcher.call(method, field, request, self._timeout(method, timeout),
                                  lambda t: self._call(method, request, t))

    # The asynchronous form of _call, for the cluster client's parallel
    # batches: _start sends, _finish waits and maps a failure like _call.
    def _start(self, method: str, request, timeout: Optional[float]) -> grpc.Future:
        return getattr(self._stub, method).future(
            request, timeout=self.timeout if timeout is None else timeout,
            metadata=self._metadata)

    @staticmethod
    def _finish(method: str, call: grpc.Future):
        try:
            return call.result()
        except grpc.RpcError as e:
            raise error_for(e.code(), e.details() or "", method) from None

    def get(self, key: Key, timeout: Optional[float] = None) -> Optional[Entry]:
        """The entry, or None on a miss."""
        return _entry(self._single("Get", "get", pb.GetRequest(key=_bytes(key)), timeout))

    def set(self, key: Key, value: Value, ttl_ms: int = 0, if_absent: bool = False,
            if_version: Optional[int] = None, timeout: Optional[float] = None) -> int:
        """Writes the value; returns its new version.

        if_absent: only if the key is absent (else AlreadyExistsError).
        if_version: only if the current version is this (else AbortedError,
        or NotFoundError when the key is absent).
        """
        req = _set_request(key, value, ttl_ms, if_absent, if_version)
        return self._single("Set", "set", req, timeout).version

    def delete(self, key: Key, timeout: Optional[float] = None) -> bool:
        """True if a live entry was removed."""
        return self._single("Delete", "delete", pb.DeleteRequest(key=_bytes(key)),
                            timeout).deleted

    def touch(self, key: Key, ttl_ms: int, timeout: Optional[float] = None) -> None:
        """Resets a live key's TTL (0 removes it); NotFoundError if absent."""
        self._single("Touch", "touch", pb.TouchRequest(key=_bytes(key), ttl_ms=ttl_ms),
                     timeout)

    def multi_get(self, keys: Sequence[Key], timeout: Optional[float] = None
                  ) -> List[Union[Optional[Entry], FurrballsError]]:
        """One result per key, in request order: the Entry, None for a miss,
        or the FurrballsError of that key (returned, not raised: an empty key
        or a full queue fails only its own key). A failure of the whole call
        raises."""
        return _multi_get_answer(self._call("MultiGet", _multi_get_request(keys), timeout),
                                 len(keys))

    def multi_set(self, items: Iterable[SetItem],
                  timeout: Optional[float] = None) -> List[Union[int, FurrballsError]]:
        """One result per item, in request order: the new version, or the
        FurrballsError of that item (returned, not raised: each write
        succeeds or fails on its own). A failure of the whole call raises."""
        req = _multi_set_request(items)
        return _multi_set_answer(self._call("MultiSet", req, timeout), len(req.items))

    def stats(self, timeout: Optional[float] = None) -> List[NodeStats]:
        """Per-node statistics, one entry per NUMA node of the server."""
        return _node_stats(self._call("Stats", pb.StatsRequest(), timeout))
