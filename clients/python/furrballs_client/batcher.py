"""Automatic batching for Client: the get/set/delete/touch calls that
concurrent threads make through one Client coalesce into Batch messages on a
small pool of streams, flat-combining style (the C++ client's
clients/cpp/batcher.h, same protocol).

Thread safety: thread-safe; call() may run on any number of threads at once.

Routing. A call that finds no other batchable call of its Client in flight
goes unary (the caller's own thread waits on it, the cheapest path for a
lone caller); otherwise it becomes an operation of a Batch message. So a
lone caller is never delayed, and there is no timer.

Protocol, per stream (all state under the stream's lock):
  - An operation joins the stream's filling batch. If no batch of the stream
    is awaiting its answer (nor its answer being handed out, below), the
    caller takes the filling batch and sends it at once; otherwise it only
    waits, and the stream's reader thread sends the filled batch after the
    answer to the one in flight (while one batch is in flight the next one
    fills). At most max_ops operations go in one message; the rest wait for
    the next.
  - The next message goes only once the callers an answer released have
    taken their results: the reader hands the answer out, then waits until
    each of those callers has woken (and, having the GIL from then until it
    blocks again, usually submitted its next operation) before it sends what
    filled. Sending first would carry only what filled during the round
    trip, and the released callers would wait a round trip for the message
    after it (16 threads: messages alternated ~1 and ~15 operations). A
    caller always wakes at once (its event is set), so the reader's wait
    ends without a timer; a caller that gave up on its deadline before the
    answer came is not waited for.
  - Every caller waits for its own operation on its own event, until its own
    deadline: a silent server fails it with DEADLINE_EXCEEDED then, as a
    unary call would, and a later answer is dropped. The message carries the
    latest deadline of its operations (the server fails an operation only
    when none of its neighbours may still run).
  - The reader thread matches each BatchResponse to the batch in flight by
    id and hands out the per-operation results. When the stream ends (an
    error, or close()), it fails every operation still waiting with the
    stream's status (UNAVAILABLE if it ended OK) and marks the stream dead;
    the next call on that slot opens a new stream.
"""
from __future__ import annotations

import itertools
import math
import queue
import threading
import time
from typing import Callable, List, Optional, Sequence, Tuple, TypeVar

import grpc

from .errors import FurrballsError, error_for, error_from_number, is_over_response_limit
from .v1 import furrballs_pb2 as pb

T = TypeVar("T")

# Below the server's --max_batch_ops (4096 by default).
MAX_OPS = 1024


class _Op:
    """One operation and, once answered, its result."""

    __slots__ = ("request", "method", "answered", "response", "error", "handed_out",
                 "given_up")

    def __init__(self, request: pb.PipelineRequest, method: str) -> None:
        self.request = request
        self.method = method
        self.answered = threading.Event()
        self.response: Optional[pb.PipelineResponse] = None
        self.error: Optional[FurrballsError] = None
        # Under the stream's lock: its answer came and the reader waits for
        # its caller to take it; or its caller stopped waiting without one.
        self.handed_out = False
        self.given_up = False

    def fail(self, error: FurrballsError) -> None:
        self.error = error
        self.answered.set()


class _Stream:
    """One Batch stream and its reader thread (protocol: module docstring)."""

    def __init__(self, stub, metadata: Optional[Sequence[Tuple[str, str]]],
                 max_ops: int) -> None:
        self._max_ops = max_ops
        self._lock = threading.Lock()
        # Callers of handed-out operations that have not yet taken their
        # results; the reader waits on _all_taken until there are none.
        self._released = 0
        self._all_taken = threading.Condition(self._lock)
        self._filling: List[_Op] = []
        self._filling_deadline = 0.0  # time.monotonic(); latest of _filling
        self._in_flight: Optional[List[_Op]] = None  # awaiting its answer
        self._in_flight_id = 0
        self._next_id = 1
        self.dead = False
        # gRPC's own thread sends what the iterator yields; None ends it.
        self._requests: "queue.SimpleQueue[Optional[pb.BatchRequest]]" = queue.SimpleQueue()
        self._call = stub.Batch(iter(self._requests.get, None), metadata=metadata)
        self._reader = threading.Thread(target=self._read, daemon=True,
                                        name="furrballs-batch-reader")
        self._reader.start()

    def submit(self, op: _Op, deadline: float) -> bool:
        """False if the stream has ended (the op was not taken)."""
        with self._lock:
            if self.dead:
                return False
            self._filling.append(op)
            self._filling_deadline = max(self._filling_deadline, deadline)
            request = self._take_locked()
        # Outside the lock: only the taker of a batch puts it, and the next
        # batch is taken only after this one's answer, so puts stay in order.
        if request is not None:
            self._requests.put(request)
        return True

    def take(self, op: _Op) -> bool:
        """Called by op's caller once it stops waiting, answered or not:
        whether op has its result (its response or error)."""
        with self._lock:
            if op.handed_out:
                self._released -= 1
                if self._released == 0:
                    self._all_taken.notify()
                return True
            op.given_up = True
            # Failed when the stream ended, or not answered at all.
            return op.answered.is_set()

    def close(self) -> None:
        """Half-closes the stream once what was taken is sent."""
        self._requests.put(None)

    def join(self, timeout: float) -> None:
        self._reader.join(timeout)

    def _take_locked(self) -> Optional[pb.BatchRequest]:
        """The next message to send, if one may go now (REQUIRES: _lock)."""
        if (self._in_flight is not None or self._released or not self._filling
                or self.dead):
            return None
        batch = self._filling[:self._max_ops]
        del self._filling[:self._max_ops]
        left_ms = math.ceil((self._filling_deadline - time.monotonic()) * 1000)
        if not self._filling:
            self._filling_deadline = 0.0
        self._in_flight = batch
        self._in_flight_id = self._next_id
        self._next_id += 1
        return pb.BatchRequest(id=self._in_flight_id, ops=[op.request for op in batch],
                               timeout_ms=max(1, left_ms))

    def _read(self) -> None:
        try:
            for response in self._call:
                self._answer(response)
            error = error_for(grpc.StatusCode.UNAVAILABLE,
                              "Batch stream ended before this operation's answer")
        except grpc.RpcError as e:
            error = error_for(e.code(), e.details() or "")
        with self._lock:
            self.dead = True
            orphans = (self._in_flight or []) + self._filling
            self._in_flight = None
            self._filling = []
        for op in orphans:
            op.fail(error_for(error.code, error.message, op.method))

    def _answer(self, response: pb.BatchResponse) -> None:
        released: List[_Op] = []
        with self._lock:
            # An id we never sent has nobody to go to; dropping it is all we
            # can do.
            if self._in_flight is not None and response.id == self._in_flight_id:
                batch, self._in_flight = self._in_flight, None
                for i, op in enumerate(batch):
                    if op.given_up:
                        continue
                    self._settle(op, i, response, len(batch))
                    op.handed_out = True
                    released.append(op)
                self._released += len(released)
        for op in released:
            op.answered.set()
        with self._lock:
            # Waiting here gives up the GIL to the callers just woken.
            while self._released:
                self._all_taken.wait()
            request = self._take_locked()
        if request is not None:
            self._requests.put(request)

    @staticmethod
    def _settle(op: _Op, i: int, response: pb.BatchResponse, sent: int) -> None:
        """Sets op's result from the answer to its message (op is its i-th
        of `sent` operations)."""
        if response.code != 0:
            op.error = error_from_number(response.code, response.message, op.method)
        elif i >= len(response.results):
            op.error = error_for(grpc.StatusCode.INTERNAL,
                                 f"the server answered {len(response.results)} "
                                 f"of {sent} operations", op.method)
        elif response.results[i].code != 0:
            r = response.results[i]
            op.error = error_from_number(r.code, r.message, op.method)
        else:
            op.response = response.results[i]


class Batcher:
    """Routes a Client's get/set/delete/touch: unary when alone, else
    batched on `streams` streams (round-robin per operation)."""

    def __init__(self, stub, metadata: Optional[Sequence[Tuple[str, str]]],
                 streams: int = 1, batch_lone_calls: bool = False,
                 max_ops: int = MAX_OPS) -> None:
        self._stub = stub
        self._metadata = metadata
        self._batch_lone_calls = batch_lone_calls
        self._max_ops = max(1, max_ops)
        self._slots: List[Optional[_Stream]] = [None] * max(1, streams)
        self._every_stream: List[_Stream] = []
        self._next_slot = itertools.count()  # next() is atomic under the GIL
        self._lock = threading.Lock()  # guards the three fields below
        self._in_flight = 0
        self._closed = False

    def call(self, method: str, field: str, request, timeout: float,
             unary: Callable[[float], T]):
        """The answer to `request` (the `field` of a PipelineRequest: "get",
        "set", "delete" or "touch"): unary(timeout) if no other call is in
        flight, else that field of its PipelineResponse. A get whose value
        did not fit its Batch answer (is_over_response_limit) is sent again
        as unary(what is left of timeout): alone it fits. Raises as unary()
        would. REQUIRES: timeout > 0 (seconds)."""
        with self._lock:
            alone = self._in_flight == 0
            self._in_flight += 1
        try:
            if alone and not self._batch_lone_calls:
                return unary(timeout)
            deadline = time.monotonic() + timeout
            op = _Op(pb.PipelineRequest(**{field: request}), method)
            try:
                return getattr(self._run(op, deadline), field)
            except FurrballsError as e:
                if not is_over_response_limit(e):
                    raise
            return unary(deadline - time.monotonic())
        finally:
            with self._lock:
                self._in_flight -= 1

    def close(self) -> None:
        """Half-closes every stream; the channel's close() ends them."""
        with self._lock:
            self._closed = True
            streams = list(self._every_stream)
        for s in streams:
            s.close()

    def join(self, timeout: float) -> None:
        """Waits up to `timeout` seconds per stream for its reader to end."""
        with self._lock:
            streams = list(self._every_stream)
        for s in streams:
            s.join(timeout)

    def _run(self, op: _Op, deadline: float) -> pb.PipelineResponse:
        slot = next(self._next_slot) % len(self._slots)
        # A stream can end between being picked and taking the op; the second
        # try gets a new one.
        for _ in range(2):
            stream = self._stream(slot)
            if stream.submit(op, deadline):
                break
        else:
            raise error_for(grpc.StatusCode.UNAVAILABLE, "Batch stream could not be opened",
                            op.method)
        try:
            op.answered.wait(max(0.0, deadline - time.monotonic()))
        finally:
            # Even when interrupted: the reader waits for every caller it
            # released to take its result.
            answered = stream.take(op)
        if not answered:
            raise error_for(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", op.method)
        if op.error is not None:
            raise op.error
        return op.response

    def _stream(self, slot: int) -> _Stream:
        with self._lock:
            if self._closed:
                raise ValueError("the Client is closed")
            s = self._slots[slot]
            if s is None or s.dead:
                s = _Stream(self._stub, self._metadata, self._max_ops)
                self._slots[slot] = s
                self._every_stream = [x for x in self._every_stream if not x.dead]
                self._every_stream.append(s)
            return s
