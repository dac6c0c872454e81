// tests/common/server_binary_main.cc: main() of the tests that start the
// real server: `<test> <furrballs_server>` (server_binary.h).
#include <cstdio>

#include <gtest/gtest.h>

#include "tests/common/server_binary.h"

namespace furrballs::test_support {
std::string server_binary;
}  // namespace furrballs::test_support

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <furrballs_server>\n", argv[0]);
    return 2;
  }
  furrballs::test_support::server_binary = argv[1];
  return RUN_ALL_TESTS();
}
