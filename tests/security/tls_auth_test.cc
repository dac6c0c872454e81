// End-to-end tests of TLS, mTLS and bearer tokens (docs/security.md): a real
// in-process server on loopback, real TLS with certificates made by the
// openssl tool (make_test_certs.sh), driven through the C++ client library
// (Client, Pipeline, ClusterClient) and a generated health stub.
//
//   - TLS: a client that trusts the server's CA is served; a plaintext client
//     and one that trusts another CA are not.
//   - mTLS: a client without a certificate, or with one from another CA, is
//     refused at the handshake.
//   - A certificate file replaced while serving is served to new connections.
//   - Tokens: none or unknown is UNAUTHENTICATED on every method and stream;
//     a read-only token reads and gets PERMISSION_DENIED for every write (per
//     op in a Pipeline); health stays open; a token file replaced while
//     serving takes effect, on an open Pipeline too; the token is checked
//     before the request's bytes are parsed.
//   - The plaintext health-only listener next to an mTLS port, and its busy
//     port stopping the start.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <absl/strings/str_cat.h>
#include <absl/synchronization/notification.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "clients/cpp/client.h"
#include "clients/cpp/cluster_client.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "service/server.h"
#include "tests/common/eventually.h"
#include "tests/common/raw_unary_call.h"

namespace furrballs {
namespace {

using absl::StatusCode;
using client::Client;
using client::ClientOptions;
using service::Server;
using service::ServerOptions;
using service::TlsFiles;
using test_support::Eventually;
using test_support::kUnparsable;
using test_support::RawUnaryCall;

constexpr char kWriter[] = "writer-0123456789abcdef";
constexpr char kReader[] = "reader-0123456789abcdef";
constexpr char kStranger[] = "stranger-0123456789abcdef";

std::string TestDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/tls_auth_test";
}

std::string Cert(const std::string& name) { return TestDir() + "/" + name; }

// Writes `text` to `path` the way Kubernetes updates a mounted Secret: a new
// file renamed over the old one, so a reader sees one or the other.
void ReplaceFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".new";
  std::ofstream(tmp, std::ios::trunc) << text;
  ASSERT_EQ(std::rename(tmp.c_str(), path.c_str()), 0) << path;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class SecurityTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string make =
        "tests/security/make_test_certs.sh " + TestDir() + " one two";
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
  }

  static ServerOptions Options(TlsFiles tls, std::string token_file = "",
                               std::string health_address = "") {
    ServerOptions o;
    o.listen_address = "127.0.0.1:0";
    o.engine.simulate_topology = true;
    o.engine.node_count = 2;
    o.engine.memory_budget_bytes = size_t{32} << 20;
    o.engine.pin_workers = false;
    o.shutdown_deadline = std::chrono::milliseconds(2000);
    o.tls = std::move(tls);
    o.auth_token_file = std::move(token_file);
    o.health_address = std::move(health_address);
    o.security_reload_interval = std::chrono::seconds(1);
    return o;
  }

  static std::unique_ptr<Server> Start(TlsFiles tls,
                                       std::string token_file = "",
                                       std::string health_address = "") {
    auto server = Server::Start(Options(std::move(tls), std::move(token_file),
                                        std::move(health_address)));
    EXPECT_TRUE(server.ok()) << server.status();
    return server.ok() ? std::move(*server) : nullptr;
  }

  static std::string Address(const Server& server) {
    return absl::StrCat("127.0.0.1:", server.port());
  }

  // A client with its own connection (never one shared with an earlier
  // channel, so a new handshake sees the server's current certificate).
  // `ca` empty: plaintext.
  static std::unique_ptr<Client> Connect(const Server& server,
                                         const std::string& ca,
                                         const std::string& cert = "",
                                         const std::string& key = "",
                                         const std::string& token = "",
                                         int batch_streams = 0) {
    ClientOptions options;
    options.default_timeout = std::chrono::milliseconds(10000);
    options.bearer_token = token;
    options.batch_streams = batch_streams;
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    std::shared_ptr<grpc::ChannelCredentials> credentials =
        grpc::InsecureChannelCredentials();
    if (!ca.empty()) {
      auto tls = client::TlsCredentialsFromFiles(ca, cert, key);
      EXPECT_TRUE(tls.ok()) << tls.status();
      credentials = *tls;
    }
    return std::make_unique<Client>(
        grpc::CreateCustomChannel(Address(server), credentials, args),
        options);
  }

  // A Set and a Get through `c`: the status of the first that fails.
  static absl::Status RoundTrip(Client& c) {
    absl::StatusOr<uint64_t> set = c.Set("k", "v");
    if (!set.ok()) return set.status();
    return c.Get("k").status();
  }
};

TEST_F(SecurityTest, TlsServesOnlyClientsThatTrustItsCa) {
  auto server = Start({Cert("one-server.crt"), Cert("one-server.key"), ""});
  ASSERT_NE(server, nullptr);
  EXPECT_TRUE(RoundTrip(*Connect(*server, Cert("one-ca.crt"))).ok());
  EXPECT_EQ(RoundTrip(*Connect(*server, "")).code(), StatusCode::kUnavailable)
      << "a plaintext client was served by a TLS port";
  EXPECT_EQ(RoundTrip(*Connect(*server, Cert("two-ca.crt"))).code(),
            StatusCode::kUnavailable)
      << "a client that does not trust the server's CA was served";
}

TEST_F(SecurityTest, MtlsRefusesClientsWithoutACertificateFromItsCa) {
  auto server = Start({Cert("one-server.crt"), Cert("one-server.key"),
                       Cert("one-ca.crt")});
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(RoundTrip(*Connect(*server, Cert("one-ca.crt"))).code(),
            StatusCode::kUnavailable)
      << "a client without a certificate was served";
  EXPECT_EQ(RoundTrip(*Connect(*server, Cert("one-ca.crt"),
                               Cert("two-client.crt"), Cert("two-client.key")))
                .code(),
            StatusCode::kUnavailable)
      << "a client certificate from another CA was accepted";
  EXPECT_TRUE(RoundTrip(*Connect(*server, Cert("one-ca.crt"),
                                 Cert("one-client.crt"),
                                 Cert("one-client.key")))
                  .ok());
}

TEST_F(SecurityTest, ReplacedCertificateIsServedWithoutARestart) {
  const std::string dir = TestDir() + "/rotate";
  std::filesystem::create_directories(dir);
  ReplaceFile(dir + "/tls.key", Slurp(Cert("one-server.key")));
  ReplaceFile(dir + "/tls.crt", Slurp(Cert("one-server.crt")));
  auto server = Start({dir + "/tls.crt", dir + "/tls.key", ""});
  ASSERT_NE(server, nullptr);
  auto before = Connect(*server, Cert("one-ca.crt"));
  ASSERT_TRUE(RoundTrip(*before).ok());
  ASSERT_NE(RoundTrip(*Connect(*server, Cert("two-ca.crt"))).code(),
            StatusCode::kOk);

  // The Secret rotates to a certificate from the other CA.
  ReplaceFile(dir + "/tls.key", Slurp(Cert("two-server.key")));
  ReplaceFile(dir + "/tls.crt", Slurp(Cert("two-server.crt")));
  EXPECT_TRUE(Eventually([&] {
    return RoundTrip(*Connect(*server, Cert("two-ca.crt"))).ok();
  })) << "new connections still get the old certificate";
  EXPECT_EQ(RoundTrip(*Connect(*server, Cert("one-ca.crt"))).code(),
            StatusCode::kUnavailable);
  // A connection made before the rotation keeps its session.
  EXPECT_TRUE(RoundTrip(*before).ok());
}

// ---- Tokens.

class TokenTest : public SecurityTest {
 protected:
  void SetUp() override {
    token_file_ = TestDir() + "/tokens-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name();
    ReplaceFile(token_file_, absl::StrCat("# test tokens\nread-write ",
                                          kWriter, "\nread-only ", kReader,
                                          "  # dashboards\n"));
    server_ = Start({}, token_file_);
    ASSERT_NE(server_, nullptr);
  }

  std::unique_ptr<Client> As(const std::string& token) {
    return Connect(*server_, "", "", "", token);
  }

  // The status of every Cache method called through `c`, by name.
  static std::vector<std::pair<std::string, absl::Status>> CallEverything(
      Client& c) {
    std::vector<std::pair<std::string, absl::Status>> out;
    out.emplace_back("Get", c.Get("k").status());
    out.emplace_back("MultiGet", c.MultiGet({"k", "l"}).status());
    out.emplace_back("Stats", c.Stats().status());
    out.emplace_back("Set", c.Set("k", "v").status());
    out.emplace_back("Touch", c.Touch("k", 0));
    out.emplace_back("MultiSet",
                     c.MultiSet({client::SetItem{.key = "m", .value = "1"}})
                         .status());
    out.emplace_back("Delete", c.Delete("k").status());
    return out;
  }

  static bool IsWrite(const std::string& method) {
    return method == "Set" || method == "Touch" || method == "MultiSet" ||
           method == "Delete";
  }

  // Runs one op on an open pipeline and returns its status.
  static absl::Status PipelineOp(
      client::Pipeline& p,
      const std::function<absl::Status(client::Pipeline&,
                                       std::function<void(absl::Status)>)>&
          submit) {
    absl::Notification done;
    absl::Status result;
    absl::Status submitted = submit(p, [&](absl::Status s) {
      result = s;
      done.Notify();
    });
    if (!submitted.ok()) return submitted;
    done.WaitForNotification();
    return result;
  }
  static absl::Status PipelineGet(client::Pipeline& p) {
    return PipelineOp(p, [](client::Pipeline& p, auto cb) {
      return p.Get("k", [cb](auto r) { cb(r.status()); });
    });
  }
  static absl::Status PipelineSet(client::Pipeline& p) {
    return PipelineOp(p, [](client::Pipeline& p, auto cb) {
      return p.Set("k", "v", {}, [cb](auto r) { cb(r.status()); });
    });
  }
  static absl::Status PipelineDelete(client::Pipeline& p) {
    return PipelineOp(p, [](client::Pipeline& p, auto cb) {
      return p.Delete("k", [cb](auto r) { cb(r.status()); });
    });
  }
  static absl::Status PipelineTouch(client::Pipeline& p) {
    return PipelineOp(p, [](client::Pipeline& p, auto cb) {
      return p.Touch("k", 0, [cb](absl::Status s) { cb(s); });
    });
  }

  std::string token_file_;
  std::unique_ptr<Server> server_;
};

TEST_F(TokenTest, NoTokenOrAnUnknownOneIsUnauthenticatedEverywhere) {
  for (const std::string& token : {std::string(), std::string(kStranger)}) {
    auto c = As(token);
    for (const auto& [method, status] : CallEverything(*c)) {
      EXPECT_EQ(status.code(), StatusCode::kUnauthenticated)
          << method << " with token '" << token << "': " << status;
    }
    auto p = c->OpenPipeline();
    const absl::Status op = PipelineGet(*p);
    EXPECT_EQ(op.code(), StatusCode::kUnauthenticated) << op;
    EXPECT_EQ(p->Close().code(), StatusCode::kUnauthenticated);
  }
  // A malformed header is no token either.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", absl::StrCat("Basic ", kWriter));
  v1::GetRequest request;
  request.set_key("k");
  v1::GetResponse response;
  auto channel = grpc::CreateChannel(Address(*server_),
                                     grpc::InsecureChannelCredentials());
  EXPECT_EQ(v1::Cache::NewStub(channel)->Get(&ctx, request, &response)
                .error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
}

// The token decides before the body is parsed: without one a body that does
// not parse is UNAUTHENTICATED like any other, a read-only token's write
// PERMISSION_DENIED; only an admitted call learns that its body was bad.
TEST_F(TokenTest, TokenIsCheckedBeforeTheBodyIsParsed) {
  auto channel = grpc::CreateChannel(Address(*server_),
                                     grpc::InsecureChannelCredentials());
  auto call = [&](const std::string& method, const std::string& token) {
    std::vector<std::pair<std::string, std::string>> metadata;
    if (!token.empty()) {
      metadata.emplace_back("authorization", absl::StrCat("Bearer ", token));
    }
    return RawUnaryCall(channel, "/furrballs.v1.Cache/" + method, kUnparsable,
                        metadata)
        .error_code();
  };
  for (const std::string method :
       {"Get", "MultiGet", "Stats", "Set", "Touch", "MultiSet", "Delete"}) {
    EXPECT_EQ(call(method, ""), grpc::StatusCode::UNAUTHENTICATED) << method;
    EXPECT_EQ(call(method, kStranger), grpc::StatusCode::UNAUTHENTICATED)
        << method;
    EXPECT_EQ(call(method, kReader), IsWrite(method)
                                         ? grpc::StatusCode::PERMISSION_DENIED
                                         : grpc::StatusCode::INVALID_ARGUMENT)
        << method;
    EXPECT_EQ(call(method, kWriter), grpc::StatusCode::INVALID_ARGUMENT)
        << method;
  }
}

// The Batch stream (the client's automatic batching) is checked like the
// unary calls: per message, a message of Gets is a read, anything else a
// write.
TEST_F(TokenTest, BatchedCallsAreCheckedLikeUnaryOnes) {
  auto writer = Connect(*server_, "", "", "", kWriter, /*batch_streams=*/1);
  EXPECT_TRUE(writer->Set("b", "v").ok());
  EXPECT_TRUE(writer->Get("b").ok());
  auto reader = Connect(*server_, "", "", "", kReader, /*batch_streams=*/1);
  const absl::StatusOr<std::optional<client::Entry>> read = reader->Get("b");
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_TRUE(read->has_value());
  EXPECT_EQ(reader->Set("b", "w").status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(reader->Delete("b").status().code(),
            StatusCode::kPermissionDenied);
  for (const std::string& token : {std::string(), std::string(kStranger)}) {
    auto stranger = Connect(*server_, "", "", "", token, /*batch_streams=*/1);
    EXPECT_EQ(stranger->Get("b").status().code(),
              StatusCode::kUnauthenticated)
        << "token '" << token << "'";
  }
}

TEST_F(TokenTest, ReadOnlyTokenReadsAndIsDeniedEveryWrite) {
  auto c = As(kReader);
  for (const auto& [method, status] : CallEverything(*c)) {
    if (IsWrite(method)) {
      EXPECT_EQ(status.code(), StatusCode::kPermissionDenied)
          << method << ": " << status;
      EXPECT_NE(status.message().find("read-only"), std::string::npos)
          << status;
    } else {
      EXPECT_TRUE(status.ok()) << method << ": " << status;
    }
  }
  // In a Pipeline each write is denied on its own; the stream stays open.
  auto p = c->OpenPipeline();
  EXPECT_TRUE(PipelineGet(*p).ok());
  EXPECT_EQ(PipelineSet(*p).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(PipelineDelete(*p).code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(PipelineTouch(*p).code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(PipelineGet(*p).ok());
  EXPECT_TRUE(p->Close().ok());
}

TEST_F(TokenTest, ReadWriteTokenDoesEverything) {
  auto c = As(kWriter);
  ASSERT_TRUE(c->Set("k", "v").ok());
  for (const auto& [method, status] : CallEverything(*c)) {
    // Touch of a key that Delete has not removed yet succeeds too.
    EXPECT_TRUE(status.ok()) << method << ": " << status;
  }
  auto p = c->OpenPipeline();
  EXPECT_TRUE(PipelineSet(*p).ok());
  EXPECT_TRUE(PipelineTouch(*p).ok());
  EXPECT_TRUE(PipelineGet(*p).ok());
  EXPECT_TRUE(PipelineDelete(*p).ok());
  EXPECT_TRUE(p->Close().ok());
}

TEST_F(TokenTest, HealthNeedsNoToken) {
  auto channel = grpc::CreateChannel(Address(*server_),
                                     grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  for (const char* service : {"", "furrballs.v1.Cache"}) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = health->Check(&ctx, request, &response);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_EQ(response.status(),
              grpc::health::v1::HealthCheckResponse::SERVING);
  }
}

TEST_F(TokenTest, ReplacedTokenFileTakesEffectWhileServing) {
  auto writer = As(kWriter);
  auto reader = As(kReader);
  auto open_stream = writer->OpenPipeline();
  ASSERT_TRUE(PipelineSet(*open_stream).ok());

  // The reader becomes a writer; the old writer's token is revoked.
  ReplaceFile(token_file_, absl::StrCat("read-write ", kReader, "\n"));
  EXPECT_TRUE(Eventually([&] { return reader->Set("k", "v").ok(); }))
      << "the promoted token still cannot write";
  EXPECT_EQ(writer->Get("k").status().code(), StatusCode::kUnauthenticated);
  // The stream opened before is checked op by op.
  EXPECT_EQ(PipelineGet(*open_stream).code(), StatusCode::kUnauthenticated);
  EXPECT_TRUE(open_stream->Close().ok());
}

// ---- TLS, mTLS and a token together, through the cluster client, and the
// plaintext health listener beside them.

TEST_F(SecurityTest, ClusterClientWithMtlsTokenAndServerName) {
  const std::string tokens = TestDir() + "/cluster-tokens";
  ReplaceFile(tokens, absl::StrCat("read-write ", kWriter, "\n"));
  auto server = Start({Cert("one-server.crt"), Cert("one-server.key"),
                       Cert("one-ca.crt")},
                      tokens);
  ASSERT_NE(server, nullptr);
  auto credentials = client::TlsCredentialsFromFiles(
      Cert("one-ca.crt"), Cert("one-client.crt"), Cert("one-client.key"));
  ASSERT_TRUE(credentials.ok()) << credentials.status();
  client::ClusterOptions options;
  options.client.credentials = *credentials;
  options.client.bearer_token = kWriter;
  // The certificate names localhost and 127.0.0.1; the endpoint is the IP.
  options.client.tls_server_name = "localhost";
  auto cluster =
      client::ClusterClient::FromEndpoints({Address(*server)}, options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  ASSERT_TRUE((*cluster)->Set("k", "v").ok());
  auto got = (*cluster)->Get("k");
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status();
  EXPECT_EQ((*got)->value, "v");

  // A name the certificate does not carry fails the handshake.
  options.client.tls_server_name = "cache.example";
  auto wrong = client::ClusterClient::FromEndpoints({Address(*server)}, options);
  ASSERT_TRUE(wrong.ok());
  EXPECT_EQ((*wrong)->Get("k").status().code(), StatusCode::kUnavailable);
}

TEST_F(SecurityTest, PlaintextHealthListenerBesideAnMtlsPort) {
  auto server = Start({Cert("one-server.crt"), Cert("one-server.key"),
                       Cert("one-ca.crt")},
                      "", "127.0.0.1:0");
  ASSERT_NE(server, nullptr);
  ASSERT_NE(server->health_port(), 0);
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", server->health_port()),
                          grpc::InsecureChannelCredentials());
  auto check = [&](const std::string& service) {
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest request;
    request.set_service(service);
    grpc::health::v1::HealthCheckResponse response;
    grpc::Status s = grpc::health::v1::Health::NewStub(channel)->Check(
        &ctx, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response.status();
  };
  EXPECT_EQ(check(""), grpc::health::v1::HealthCheckResponse::SERVING);
  EXPECT_EQ(check("furrballs.v1.Cache"),
            grpc::health::v1::HealthCheckResponse::SERVING);

  // Only health is served there: no Cache without TLS.
  grpc::ClientContext ctx;
  v1::GetRequest request;
  request.set_key("k");
  v1::GetResponse response;
  EXPECT_EQ(v1::Cache::NewStub(channel)->Get(&ctx, request, &response)
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);

  // It drains with the main port.
  server->BeginDrain();
  EXPECT_EQ(check("furrballs.v1.Cache"),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
}

// Like the main port (tests/service:busy_port_test), a busy health port
// stops the start: with gRPC's default SO_REUSEPORT a second server would
// share it and the kernel would split the probes between the two.
TEST_F(SecurityTest, BusyHealthPortStopsTheStart) {
  auto first = Start({}, "", "127.0.0.1:0");
  ASSERT_NE(first, nullptr);
  auto second = Server::Start(
      Options({}, "", absl::StrCat("127.0.0.1:", first->health_port())));
  ASSERT_FALSE(second.ok()) << "a second server shares health port "
                            << first->health_port();
  EXPECT_NE(second.status().message().find("could not listen on "
                                           "--health_address"),
            std::string::npos)
      << second.status();
}

}  // namespace
}  // namespace furrballs
