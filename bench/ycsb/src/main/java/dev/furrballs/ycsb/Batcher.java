// Automatic batching for the Furrballs YCSB binding: the operations that
// YCSB's threads issue through one shared channel coalesce into Batch
// messages on a small pool of streams, flat-combining style, with the
// protocol of the C++ client's clients/cpp/batcher.h.
//
// Thread safety: thread-safe; call() may run on any number of threads.
//
// Routing: a call that finds no other call of this Batcher in flight goes
// unary (a blocking unary call runs on the caller's thread, the cheapest
// path for a lone caller); otherwise it becomes an operation of a Batch
// message. So a lone caller is not delayed, and there is no timer.
//
// Protocol, per stream (state under its lock): an operation joins the
// filling batch; if no batch of the stream awaits its answer (nor callers
// released by the last answer have yet to take their results), the caller
// sends the filling batch at once; otherwise the batch is sent after the
// answer to the batch in flight (while one batch is in flight the next
// fills), once every caller that answer released has woken and taken its
// result: the last of them sends it, or the thread that delivered the answer
// if they were all quicker. So the callers one answer releases (each of
// which submits its next operation as soon as it wakes) share the next
// message, instead of it carrying only what filled during the round trip
// while they wait a round trip for the one after. A caller whose deadline
// passed before the answer is not waited for. No timer: every caller waited
// for has its answer. Sends go through sendLock, since a gRPC
// StreamObserver must not be called from two threads at once. Every caller
// waits for its own operation until its own deadline (DEADLINE_EXCEEDED
// then, as a unary call would; a later answer is dropped). When the stream
// ends, every operation still waiting fails with its status (UNAVAILABLE if
// it ended OK), and the next call on that slot opens a new stream.
//
// A Get whose value did not fit its Batch answer (the server's per-op
// RESOURCE_EXHAUSTED naming --max_response_bytes, service/response_budget.h)
// is sent again as a unary call within what is left of its deadline: its
// caller asked for one value, and one value alone always fits (the server
// keeps that limit at least --max_value_bytes).
package dev.furrballs.ycsb;

import furrballs.v1.Furrballs.BatchRequest;
import furrballs.v1.Furrballs.BatchResponse;
import furrballs.v1.Furrballs.PipelineRequest;
import furrballs.v1.Furrballs.PipelineResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.StreamObserver;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.LongFunction;
import java.util.function.Supplier;

final class Batcher {
  private static final MethodDescriptor<BatchRequest, BatchResponse> BATCH =
      MethodDescriptor.<BatchRequest, BatchResponse>newBuilder()
          .setType(MethodDescriptor.MethodType.BIDI_STREAMING)
          .setFullMethodName(MethodDescriptor.generateFullMethodName("furrballs.v1.Cache", "Batch"))
          .setRequestMarshaller(ProtoUtils.marshaller(BatchRequest.getDefaultInstance()))
          .setResponseMarshaller(ProtoUtils.marshaller(BatchResponse.getDefaultInstance()))
          .build();

  // Below the server's --max_batch_ops (4096 by default).
  private static final int MAX_OPS = 1024;

  private final Channel channel;
  private final Stream[] slots;
  private final AtomicInteger nextSlot = new AtomicInteger();
  private final AtomicInteger inFlight = new AtomicInteger();

  Batcher(Channel channel, int streams) {
    this.channel = channel;
    this.slots = new Stream[Math.max(1, streams)];
  }

  // The answer: `unary` (given the timeout in ms) if no other call is in
  // flight, else `op` sent in a Batch message and its answer converted by
  // `fromBatch`; an op over the response limit goes unary with what is left
  // of the timeout. Throws StatusRuntimeException on failure, as a unary
  // call does. REQUIRES: timeoutMs > 0.
  <T> T call(LongFunction<T> unary, Supplier<PipelineRequest> op,
             Function<PipelineResponse, T> fromBatch, long timeoutMs) {
    boolean alone = inFlight.getAndIncrement() == 0;
    try {
      if (alone) {
        return unary.apply(timeoutMs);
      }
      long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
      try {
        return fromBatch.apply(run(op.get(), deadline));
      } catch (StatusRuntimeException e) {
        if (!overResponseLimit(e.getStatus())) {
          throw e;
        }
      }
      long leftMs = TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime());
      if (leftMs <= 0) {
        throw Status.DEADLINE_EXCEEDED.withDescription("Deadline Exceeded").asRuntimeException();
      }
      return unary.apply(leftMs);
    } finally {
      inFlight.decrementAndGet();
    }
  }

  // Whether `status` is a Get's RESOURCE_EXHAUSTED for the response limit,
  // told apart from a full queue or memory by the flag its message names.
  static boolean overResponseLimit(Status status) {
    String message = status.getDescription();
    return status.getCode() == Status.Code.RESOURCE_EXHAUSTED && message != null
        && message.contains("--max_response_bytes");
  }

  void close() {
    synchronized (slots) {
      for (Stream s : slots) {
        if (s != null) {
          s.close();
        }
      }
    }
  }

  private PipelineResponse run(PipelineRequest op, long deadline) {
    Pending p = new Pending(op);
    int slot = Math.floorMod(nextSlot.getAndIncrement(), slots.length);
    // A stream can end between being picked and taking the op; the second
    // try gets a new one.
    Stream s = stream(slot);
    if (!s.submit(p, deadline)) {
      s = stream(slot);
      if (!s.submit(p, deadline)) {
        throw Status.UNAVAILABLE.withDescription("Batch stream could not be opened")
            .asRuntimeException();
      }
    }
    try {
      return p.result.get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
    } catch (TimeoutException e) {
      throw Status.DEADLINE_EXCEEDED.withDescription("Deadline Exceeded").asRuntimeException();
    } catch (ExecutionException e) {
      throw (StatusRuntimeException) e.getCause();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw Status.CANCELLED.withDescription("interrupted").asRuntimeException();
    } finally {
      s.taken(p);
    }
  }

  private Stream stream(int slot) {
    synchronized (slots) {
      Stream s = slots[slot];
      if (s == null || s.dead()) {
        s = new Stream();
        slots[slot] = s;
      }
      return s;
    }
  }

  private static final class Pending {
    final PipelineRequest op;
    final CompletableFuture<PipelineResponse> result = new CompletableFuture<>();
    // Guarded by its stream's lock: an answer came and the stream waits for
    // the caller to take it; or the caller stopped waiting before that.
    boolean released;
    boolean gone;

    Pending(PipelineRequest op) {
      this.op = op;
    }

    void fail(Status status) {
      result.completeExceptionally(status.asRuntimeException());
    }
  }

  private final class Stream implements StreamObserver<BatchResponse> {
    private final Object lock = new Object();
    private final Object sendLock = new Object();
    private final StreamObserver<BatchRequest> requests;
    // Guarded by lock.
    private List<Pending> filling = new ArrayList<>();
    private long fillingDeadline;  // System.nanoTime(); latest of filling
    private List<Pending> awaiting;  // the batch in flight, or null
    private long awaitingId;
    private long nextId = 1;
    private boolean dead;
    private int released;  // callers an answer released, result not yet taken

    Stream() {
      requests = ClientCalls.asyncBidiStreamingCall(channel.newCall(BATCH, CallOptions.DEFAULT),
                                                    this);
    }

    boolean dead() {
      synchronized (lock) {
        return dead;
      }
    }

    boolean submit(Pending p, long deadline) {
      BatchRequest request;
      synchronized (lock) {
        if (dead) {
          return false;
        }
        if (filling.isEmpty() || deadline - fillingDeadline > 0) {
          fillingDeadline = deadline;
        }
        filling.add(p);
        request = takeLocked();
      }
      send(request);
      return true;
    }

    void close() {
      synchronized (sendLock) {
        requests.onCompleted();
      }
    }

    // p's caller stopped waiting, answered or not; the last released caller
    // to take its result sends what filled meanwhile.
    void taken(Pending p) {
      BatchRequest next = null;
      synchronized (lock) {
        if (!p.released) {
          p.gone = true;
          return;
        }
        p.released = false;
        released--;
        next = takeLocked();
      }
      send(next);
    }

    // The next message to send, if one may go now. REQUIRES: lock held.
    private BatchRequest takeLocked() {
      if (awaiting != null || released != 0 || filling.isEmpty() || dead) {
        return null;
      }
      int n = Math.min(filling.size(), MAX_OPS);
      List<Pending> batch = new ArrayList<>(filling.subList(0, n));
      filling.subList(0, n).clear();
      long leftMs = TimeUnit.NANOSECONDS.toMillis(fillingDeadline - System.nanoTime()) + 1;
      BatchRequest.Builder b = BatchRequest.newBuilder()
          .setId(nextId).setTimeoutMs(Math.max(1, leftMs));
      for (Pending p : batch) {
        b.addOps(p.op);
      }
      awaiting = batch;
      awaitingId = nextId++;
      return b.build();
    }

    // Only the taker of a batch sends it, and the next is taken only after
    // this one's answer, so sends keep their order.
    private void send(BatchRequest request) {
      if (request == null) {
        return;
      }
      synchronized (sendLock) {
        requests.onNext(request);
      }
    }

    @Override
    public void onNext(BatchResponse response) {
      List<Pending> batch = null;
      synchronized (lock) {
        if (awaiting != null && response.getId() == awaitingId) {
          batch = awaiting;
          awaiting = null;
          // Counted before any of them can wake and take its result.
          for (Pending p : batch) {
            if (!p.gone) {
              p.released = true;
              released++;
            }
          }
        }
      }
      if (batch == null) {
        return;  // an id we never sent: nobody to give it to
      }
      for (int i = 0; i < batch.size(); i++) {
        Pending p = batch.get(i);
        if (response.getCode() != 0) {
          p.fail(Status.fromCodeValue(response.getCode()).withDescription(response.getMessage()));
        } else if (i >= response.getResultsCount()) {
          p.fail(Status.INTERNAL.withDescription("the server answered "
              + response.getResultsCount() + " of " + batch.size() + " operations"));
        } else if (response.getResults(i).getCode() != 0) {
          PipelineResponse r = response.getResults(i);
          p.fail(Status.fromCodeValue(r.getCode()).withDescription(r.getMessage()));
        } else {
          p.result.complete(response.getResults(i));
        }
      }
      // If every caller has already taken its result, nobody else sends.
      BatchRequest next;
      synchronized (lock) {
        next = takeLocked();
      }
      send(next);
    }

    @Override
    public void onError(Throwable t) {
      end(Status.fromThrowable(t));
    }

    @Override
    public void onCompleted() {
      end(Status.UNAVAILABLE.withDescription("Batch stream ended before this operation's answer"));
    }

    private void end(Status status) {
      List<Pending> orphans = new ArrayList<>();
      synchronized (lock) {
        dead = true;
        if (awaiting != null) {
          orphans.addAll(awaiting);
        }
        orphans.addAll(filling);
        awaiting = null;
        filling = new ArrayList<>();
      }
      for (Pending p : orphans) {
        p.fail(status);
      }
    }
  }
}
