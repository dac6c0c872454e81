// YCSB binding for Furrballs over gRPC (furrballs.v1.Cache Get/Set/Delete,
// unary). One channel per YCSB thread, as the Redis and memcached bindings
// hold one connection per thread.
//
// Properties: furrballs.address (default 127.0.0.1:50051),
// furrballs.timeout_ms (default 10000), and for a server with TLS or tokens
// (docs/security.md):
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

  private ManagedChannel channel;
  // The channel, with the bearer token attached to every call when one is set.
  private Channel calls;
  private long timeoutMs;

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String address = p.getProperty("furrballs.address", "127.0.0.1:50051");
    timeoutMs = Long.parseLong(p.getProperty("furrballs.timeout_ms", "10000"));
    try {
      channel = newChannel(address, p);
      calls = channel;
      String tokenFile = p.getProperty("furrballs.token_file", "");
      if (!tokenFile.isEmpty()) {
        String token = Files.readAllLines(Paths.get(tokenFile), StandardCharsets.UTF_8)
            .stream().findFirst().orElse("").strip();
        if (token.isEmpty()) {
          throw new DBException("furrballs.token_file " + tokenFile + " is empty");
        }
        Metadata headers = new Metadata();
        headers.put(AUTHORIZATION, "Bearer " + token);
        calls = ClientInterceptors.intercept(
            channel, MetadataUtils.newAttachHeadersInterceptor(headers));
      }
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
    channel.shutdownNow();
    try {
      channel.awaitTermination(5, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private <Req, Resp> Resp call(MethodDescriptor<Req, Resp> method, Req request) {
    return ClientCalls.blockingUnaryCall(
        calls, method,
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
