// MetricsExporter over real HTTP on loopback: a scrape serves the
// collector's families and calls each source once, a taken port is an error
// that names the address, and once the exporter is gone nothing listens.
#include "metrics/metrics_exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>

#include <gtest/gtest.h>

namespace furrballs::metrics {
namespace {

// GET `path` from 127.0.0.1:`port` with HTTP/1.0 (the server closes the
// connection after the response). Returns false if it cannot connect.
bool HttpGet(int port, const std::string& path, std::string* response) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return false;
  }
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: test\r\n\r\n";
  if (write(fd, request.data(), request.size()) !=
      static_cast<ssize_t>(request.size())) {
    close(fd);
    return false;
  }
  response->clear();
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) response->append(buf, n);
  close(fd);
  return true;
}

StatsSources TwoNodeSources(std::atomic<int>* engine_calls) {
  StatsSources sources;
  sources.engine = [engine_calls] {
    engine_calls->fetch_add(1);
    std::vector<NodeStatsSnapshot> nodes(2);
    nodes[0].node = 0;
    nodes[1].node = 1;
    nodes[1].hits_remote = 42;
    return nodes;
  };
  return sources;
}

TEST(MetricsExporterTest, ServesTheCollectorOnMetrics) {
  std::atomic<int> engine_calls{0};
  auto exporter = MetricsExporter::Start("127.0.0.1:0", TwoNodeSources(&engine_calls));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  ASSERT_GT((*exporter)->port(), 0);

  std::string response;
  ASSERT_TRUE(HttpGet((*exporter)->port(), "/metrics", &response));
  EXPECT_EQ(response.rfind("HTTP/1.1 200", 0), 0u) << response.substr(0, 200);
  EXPECT_NE(response.find("# TYPE furrballs_hits_total counter"), std::string::npos);
  EXPECT_NE(response.find("furrballs_hits_total{node=\"1\",locality=\"remote\"} 42"),
            std::string::npos)
      << response;
  EXPECT_NE(response.find("furrballs_build_info{"), std::string::npos);
  EXPECT_NE(response.find("process_open_fds "), std::string::npos);
  EXPECT_EQ(engine_calls.load(), 1);
}

TEST(MetricsExporterTest, TakenPortIsAnErrorNamingTheAddress) {
  std::atomic<int> calls{0};
  auto first = MetricsExporter::Start("127.0.0.1:0", TwoNodeSources(&calls));
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string address = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = MetricsExporter::Start(address, TwoNodeSources(&calls));
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find(address), absl::string_view::npos)
      << second.status();
}

TEST(MetricsExporterTest, NothingListensAfterDestruction) {
  std::atomic<int> calls{0};
  auto exporter = MetricsExporter::Start("127.0.0.1:0", TwoNodeSources(&calls));
  ASSERT_TRUE(exporter.ok()) << exporter.status();
  const int port = (*exporter)->port();
  exporter->reset();
  std::string response;
  EXPECT_FALSE(HttpGet(port, "/metrics", &response));
  EXPECT_EQ(calls.load(), 0);
}

}  // namespace
}  // namespace furrballs::metrics
