"""The errors every Furrballs call raises: a FurrballsError carrying the
grpc.StatusCode (the server's or the channel's) and the message, with a
subclass for each code the API contract names.

Thread safety: immutable values and pure functions.
"""
from __future__ import annotations

from typing import Dict, Type

import grpc


class FurrballsError(Exception):
    """A failed call: the gRPC status code and the server's message."""

    def __init__(self, code: grpc.StatusCode, message: str, method: str = "") -> None:
        self.code = code
        self.message = message
        self.method = method
        where = f"{method}: " if method else ""
        super().__init__(f"{where}{code.name}: {message}")


class InvalidArgumentError(FurrballsError):
    """Empty key, key or value over the server's limit, bad TTL."""


class AlreadyExistsError(FurrballsError):
    """set(if_absent=True) on a live key."""


class AbortedError(FurrballsError):
    """set(if_version=N) saw a different version."""


class NotFoundError(FurrballsError):
    """set(if_version=N) or touch() on a missing key."""


class ResourceExhaustedError(FurrballsError):
    """The server cannot make room, or a node's queue is full."""


class DeadlineExceededError(FurrballsError):
    """The call's deadline passed."""


class UnavailableError(FurrballsError):
    """No connection, or the server is starting or stopping."""


class UnauthenticatedError(FurrballsError):
    """The server needs a bearer token and got none, or an unknown one."""


class PermissionDeniedError(FurrballsError):
    """A write with a read-only token."""


_ERRORS: Dict[grpc.StatusCode, Type[FurrballsError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgumentError,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExistsError,
    grpc.StatusCode.ABORTED: AbortedError,
    grpc.StatusCode.NOT_FOUND: NotFoundError,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhaustedError,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceededError,
    grpc.StatusCode.UNAVAILABLE: UnavailableError,
    grpc.StatusCode.UNAUTHENTICATED: UnauthenticatedError,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDeniedError,
}

_CODES_BY_NUMBER: Dict[int, grpc.StatusCode] = {c.value[0]: c for c in grpc.StatusCode}


def error_for(code: grpc.StatusCode, message: str, method: str = "") -> FurrballsError:
    """The most specific FurrballsError for ``code``."""
    return _ERRORS.get(code, FurrballsError)(code, message, method)


def error_from_number(number: int, message: str, method: str) -> FurrballsError:
    code = _CODES_BY_NUMBER.get(number, grpc.StatusCode.UNKNOWN)
    if code is grpc.StatusCode.UNKNOWN and number != code.value[0]:
        message = f"status code {number} from server: {message}"
    return error_for(code, message, method)


def is_over_response_limit(error: FurrballsError) -> bool:
    """Whether ``error`` is the RESOURCE_EXHAUSTED a get in a Batch or
    MultiGet answer gets when its value did not fit beside the others under
    the server's --max_response_bytes (service/response_budget.h), told apart
    from a full queue or memory by the flag its message names. Such a get
    succeeds when sent alone: the server keeps that limit at least one
    value's size."""
    return (error.code is grpc.StatusCode.RESOURCE_EXHAUSTED
            and "--max_response_bytes" in error.message)
