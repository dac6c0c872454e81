// The cost of the token check on the request path: the SHA-256 of the
// presented token and the role lookup, as every Cache call and Pipeline op
// pays it (docs/security.md), with the lookup shared by several threads.
//
// bazel run -c opt //service:token_auth_bench -- --benchmark_repetitions=5
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include <benchmark/benchmark.h>

#include "service/token_auth.h"

namespace furrballs::service {
namespace {

// 64 characters, what `openssl rand -hex 32` makes.
constexpr char kToken[] =
    "3f8a0c1d2e4b5a69788796a5b4c3d2e1"
    "f00112233445566778899aabbccddeef";

std::unique_ptr<TokenAuthenticator> OpenWithTokens(int count) {
  const char* tmp = std::getenv("TMPDIR");
  const std::string path =
      std::string(tmp != nullptr ? tmp : "/tmp") + "/token_auth_bench_tokens";
  {
    std::ofstream out(path, std::ios::trunc);
    out << "read-write " << kToken << "\n";
    for (int i = 1; i < count; ++i) {
      out << "read-only other-token-" << i << "-0123456789abcdef\n";
    }
  }
  auto auth = TokenAuthenticator::Open(path, std::chrono::seconds(3600));
  if (!auth.ok()) std::abort();
  return std::move(*auth);
}

void BM_DigestToken(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(DigestToken(kToken));
}
BENCHMARK(BM_DigestToken);

// Digest and lookup: what a unary call adds, with `range(0)` tokens listed.
void BM_AuthorizeWrite(benchmark::State& state) {
  static std::unique_ptr<TokenAuthenticator> auth;
  if (state.thread_index() == 0) auth = OpenWithTokens(state.range(0));
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        auth->Authorize(DigestToken(kToken), Access::kWrite, "Set").ok());
  }
}
BENCHMARK(BM_AuthorizeWrite)->Arg(1)->Arg(1000)->ThreadRange(1, 2);

}  // namespace
}  // namespace furrballs::service

BENCHMARK_MAIN();
