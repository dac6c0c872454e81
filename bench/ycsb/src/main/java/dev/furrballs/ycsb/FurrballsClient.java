// YCSB binding for Furrballs over gRPC (furrballs.v1.Cache Get/Set/Delete,
// unary, plaintext). One channel per YCSB thread, as the Redis and memcached
// bindings hold one connection per thread.
//
// Properties: furrballs.address (default 127.0.0.1:50051),
// furrballs.timeout_ms (default 10000).
package dev.furrballs.ycsb;

import furrballs.v1.Furrballs.DeleteRequest;
import furrballs.v1.Furrballs.DeleteResponse;
import furrballs.v1.Furrballs.GetRequest;
import furrballs.v1.Furrballs.GetResponse;
import furrballs.v1.Furrballs.SetRequest;
import furrballs.v1.Furrballs.SetResponse;
import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import io.grpc.CallOptions;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.TimeUnit;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

public final class FurrballsClient extends DB {
  // The three RPCs, described directly: the same wire calls generated stubs
  // would make (see pom.xml for why there are no generated stubs).
  private static final MethodDescriptor<GetRequest, GetResponse> GET =
      unary("Get", GetRequest.getDefaultInstance(), GetResponse.getDefaultInstance());
  private static final MethodDescriptor<SetRequest, SetResponse> SET =
      unary("Set", SetRequest.getDefaultInstance(), SetResponse.getDefaultInstance());
  private static final MethodDescriptor<DeleteRequest, DeleteResponse> DELETE =
      unary("Delete", DeleteRequest.getDefaultInstance(), DeleteResponse.getDefaultInstance());

  private static <Req extends Message, Resp extends Message> MethodDescriptor<Req, Resp> unary(
      String method, Req request, Resp response) {
    return MethodDescriptor.<Req, Resp>newBuilder()
        .setType(MethodDescriptor.MethodType.UNARY)
        .setFullMethodName(MethodDescriptor.generateFullMethodName("furrballs.v1.Cache", method))
        .setRequestMarshaller(ProtoUtils.marshaller(request))
        .setResponseMarshaller(ProtoUtils.marshaller(response))
        .build();
  }

  private ManagedChannel channel;
  private long timeoutMs;

  @Override
  public void init() throws DBException {
    String address = getProperties().getProperty("furrballs.address", "127.0.0.1:50051");
    timeoutMs = Long.parseLong(getProperties().getProperty("furrballs.timeout_ms", "10000"));
    channel = ManagedChannelBuilder.forTarget(address).usePlaintext().build();
  }

  @Override
  public void cleanup() throws DBException {
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private <Req, Resp> Resp call(MethodDescriptor<Req, Resp> method, Req request) {
    return ClientCalls.blockingUnaryCall(
        channel, method,
        CallOptions.DEFAULT.withDeadlineAfter(timeoutMs, TimeUnit.MILLISECONDS), request);
  }

  private static ByteString key(String key) {
    return ByteString.copyFrom(key, StandardCharsets.UTF_8);
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      GetResponse r = call(GET, GetRequest.newBuilder().setKey(key(key)).build());
      if (!r.getFound()) {
        return Status.NOT_FOUND;
      }
      return RecordCodec.decode(r.getValue().toByteArray(), fields, result)
          ? Status.OK : Status.UNEXPECTED_STATE;
    } catch (StatusRuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return insert(table, key, values);
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    try {
      call(SET, SetRequest.newBuilder()
          .setKey(key(key))
          .setValue(ByteString.copyFrom(RecordCodec.encode(values)))
          .build());
      return Status.OK;
    } catch (StatusRuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      call(DELETE, DeleteRequest.newBuilder().setKey(key(key)).build());
      return Status.OK;
    } catch (StatusRuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
                     Vector<HashMap<String, ByteIterator>> result) {
    return Status.NOT_IMPLEMENTED;
  }
}
