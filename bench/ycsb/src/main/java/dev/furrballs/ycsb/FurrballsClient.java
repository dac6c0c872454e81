// YCSB binding for Furrballs over gRPC (furrballs.v1.Cache Get/Set/Delete).
// By default the YCSB threads of the process share one channel, and their
// concurrent operations coalesce into Batch messages (Batcher.java: flat
// combining; a call alone in flight goes unary). furrballs.batch_streams=0
// gives each thread its own channel and unary calls instead, as the Redis
// and memcached bindings hold one connection per thread.
//
// Properties: furrballs.address (default 127.0.0.1:50051),
// furrballs.timeout_ms (default 10000), furrballs.batch_streams (Batch
// streams of the shared channel, default 1; 0: no batching, a channel per
// thread), and for a server with TLS or tokens (docs/security.md):
//   furrballs.tls              true: TLS with the system's CAs (default false;
//                              any furrballs.tls.* file implies TLS)
//   furrballs.tls.ca_file      PEM CAs that may sign the server's certificate
//   furrballs.tls.cert_file    PEM client certificate chain (mTLS), with
//   furrballs.tls.key_file     its PKCS#8 PEM key
//   furrballs.tls.server_name  the name the server's certificate carries, when
//                              it is not the host of furrballs.address
//   furrballs.token_file       file whose first line is the bearer token
package dev.furrballs.ycsb;

import furrballs.v1.Furrballs.DeleteRequest;
import furrballs.v1.Furrballs.DeleteResponse;
import furrballs.v1.Furrballs.GetRequest;
import furrballs.v1.Furrballs.GetResponse;
import furrballs.v1.Furrballs.PipelineRequest;
import furrballs.v1.Furrballs.PipelineResponse;
import furrballs.v1.Furrballs.SetRequest;
import furrballs.v1.Furrballs.SetResponse;
import com.google.protobuf.ByteString;
import com.google.protobuf.Message;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientInterceptors;
import io.grpc.Grpc;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.TlsChannelCredentials;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;
import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.function.Supplier;
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

  private static final Metadata.Key<String> AUTHORIZATION =
      Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER);

  // A channel, with the bearer token attached to every call when one is
  // set, and with batching its Batcher.
  private static final class Connection {
    final ManagedChannel channel;
    final Channel calls;
    final Batcher batcher;  // null without batching
    int users;  // of the shared connection; guarded by SHARED

    Connection(ManagedChannel channel, Channel calls, int batchStreams) {
      this.channel = channel;
      this.calls = calls;
      this.batcher = batchStreams > 0 ? new Batcher(calls, batchStreams) : null;
    }

    void close() {
      if (batcher != null) {
        batcher.close();
      }
      channel.shutdownNow();
      try {
        channel.awaitTermination(5, TimeUnit.SECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
  }

  // The connection the threads share when batching, by its settings; each
  // thread's init() takes a use and its cleanup() gives it back, and the
  // last one closes it.
  private static final Map<String, Connection> SHARED = new HashMap<>();

  private Connection connection;
  private String sharedKey;  // null for a connection of this thread's own
  private long timeoutMs;

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    timeoutMs = Long.parseLong(p.getProperty("furrballs.timeout_ms", "10000"));
    if (timeoutMs <= 0) {
      throw new DBException("furrballs.timeout_ms must be more than 0");
    }
    int batchStreams = Integer.parseInt(p.getProperty("furrballs.batch_streams", "1"));
    if (batchStreams < 0) {
      throw new DBException("furrballs.batch_streams must be 0 or more");
    }
    if (batchStreams == 0) {
      connection = connect(p, 0);
      return;
    }
    StringBuilder key = new StringBuilder();
    p.stringPropertyNames().stream().filter(n -> n.startsWith("furrballs.")).sorted()
        .forEach(n -> key.append(n).append('=').append(p.getProperty(n)).append('\n'));
    sharedKey = key.toString();
    synchronized (SHARED) {
      connection = SHARED.get(sharedKey);
      if (connection == null) {
        connection = connect(p, batchStreams);
        SHARED.put(sharedKey, connection);
      }
      connection.users++;
    }
  }

  private static Connection connect(Properties p, int batchStreams) throws DBException {
    String address = p.getProperty("furrballs.address", "127.0.0.1:50051");
    try {
      ManagedChannel channel = newChannel(address, p);
      Channel calls = channel;
      String tokenFile = p.getProperty("furrballs.token_file", "");
      if (!tokenFile.isEmpty()) {
        String token = Files.readAllLines(Paths.get(tokenFile), StandardCharsets.UTF_8)
            .stream().findFirst().orElse("").strip();
        if (token.isEmpty()) {
          channel.shutdownNow();
          throw new DBException("furrballs.token_file " + tokenFile + " is empty");
        }
        Metadata headers = new Metadata();
        headers.put(AUTHORIZATION, "Bearer " + token);
        calls = ClientInterceptors.intercept(
            channel, MetadataUtils.newAttachHeadersInterceptor(headers));
      }
      return new Connection(channel, calls, batchStreams);
    } catch (IOException e) {
      throw new DBException("furrballs: " + e.getMessage(), e);
    }
  }

  private static ManagedChannel newChannel(String address, Properties p) throws IOException {
    String ca = p.getProperty("furrballs.tls.ca_file", "");
    String cert = p.getProperty("furrballs.tls.cert_file", "");
    String key = p.getProperty("furrballs.tls.key_file", "");
    String serverName = p.getProperty("furrballs.tls.server_name", "");
    boolean tls = Boolean.parseBoolean(p.getProperty("furrballs.tls", "false"))
        || !ca.isEmpty() || !cert.isEmpty() || !key.isEmpty() || !serverName.isEmpty();
    if (!tls) {
      return ManagedChannelBuilder.forTarget(address).usePlaintext().build();
    }
    TlsChannelCredentials.Builder credentials = TlsChannelCredentials.newBuilder();
    if (!ca.isEmpty()) {
      credentials.trustManager(new File(ca));
    }
    if (cert.isEmpty() != key.isEmpty()) {
      throw new IOException("furrballs.tls.cert_file and furrballs.tls.key_file go together");
    }
    if (!cert.isEmpty()) {
      credentials.keyManager(new File(cert), new File(key));
    }
    ManagedChannelBuilder<?> builder = Grpc.newChannelBuilder(address, credentials.build());
    if (!serverName.isEmpty()) {
      builder.overrideAuthority(serverName);
    }
    return builder.build();
  }

  @Override
  public void cleanup() throws DBException {
    if (sharedKey == null) {
      connection.close();
      return;
    }
    synchronized (SHARED) {
      if (--connection.users > 0) {
        return;
      }
      SHARED.remove(sharedKey);
    }
    connection.close();
  }

  private <Req, Resp> Resp call(MethodDescriptor<Req, Resp> method, Req request, long callMs) {
    return ClientCalls.blockingUnaryCall(
        connection.calls, method,
        CallOptions.DEFAULT.withDeadlineAfter(callMs, TimeUnit.MILLISECONDS), request);
  }

  // A Get, Set or Delete: unary, or through the Batcher when batching.
  private <Req, Resp> Resp single(MethodDescriptor<Req, Resp> method, Req request,
                                  Supplier<PipelineRequest> op,
                                  Function<PipelineResponse, Resp> fromBatch) {
    if (connection.batcher == null) {
      return call(method, request, timeoutMs);
    }
    return connection.batcher.call(t -> call(method, request, t), op, fromBatch, timeoutMs);
  }

  private static ByteString key(String key) {
    return ByteString.copyFrom(key, StandardCharsets.UTF_8);
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
                     Map<String, ByteIterator> result) {
    try {
      GetRequest request = GetRequest.newBuilder().setKey(key(key)).build();
      GetResponse r = single(GET, request,
          () -> PipelineRequest.newBuilder().setGet(request).build(), PipelineResponse::getGet);
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
      SetRequest request = SetRequest.newBuilder()
          .setKey(key(key))
          .setValue(ByteString.copyFrom(RecordCodec.encode(values)))
          .build();
      single(SET, request,
          () -> PipelineRequest.newBuilder().setSet(request).build(), PipelineResponse::getSet);
      return Status.OK;
    } catch (StatusRuntimeException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status delete(String table, String key) {
    try {
      DeleteRequest request = DeleteRequest.newBuilder().setKey(key(key)).build();
      single(DELETE, request,
          () -> PipelineRequest.newBuilder().setDelete(request).build(),
          PipelineResponse::getDelete);
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
