"""Python client of the Furrballs gRPC cache (furrballs.v1.Cache).

    from furrballs_client import Client, NotFoundError

    with Client("127.0.0.1:50051") as cache:
        version = cache.set("user:7", b"{...}", ttl_ms=60_000)
        entry = cache.get("user:7")        # None on a miss
        cache.set("user:7", b"new", if_version=entry.version)

    # A cluster, sharded by rendezvous hashing as the C++ ClusterClient does:
    with ClusterClient("dns:///furrballs.cache.svc.cluster.local:50051") as cluster:
        cluster.set("user:7", b"{...}")

Every failed call raises a FurrballsError subclass that carries the gRPC code.
"""
from .client import (
    AbortedError,
    AlreadyExistsError,
    Client,
    DeadlineExceededError,
    Entry,
    FurrballsError,
    InvalidArgumentError,
    NodeStats,
    NotFoundError,
    PermissionDeniedError,
    ResourceExhaustedError,
    SetItem,
    UnauthenticatedError,
    UnavailableError,
    tls_credentials,
)
from .cluster import ClusterClient, EndpointStats, resolve_with_getaddrinfo
from .rendezvous import Rendezvous

__all__ = [
    "AbortedError",
    "AlreadyExistsError",
    "Client",
    "ClusterClient",
    "DeadlineExceededError",
    "EndpointStats",
    "Entry",
    "FurrballsError",
    "InvalidArgumentError",
    "NodeStats",
    "NotFoundError",
    "PermissionDeniedError",
    "Rendezvous",
    "ResourceExhaustedError",
    "SetItem",
    "UnauthenticatedError",
    "UnavailableError",
    "resolve_with_getaddrinfo",
    "tls_credentials",
]
