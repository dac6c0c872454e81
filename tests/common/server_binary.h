// tests/common/server_binary.h: the furrballs_server binary an end-to-end
// test starts, given to the test as its only argument (BUILD: args =
// ["$(rootpath //service:furrballs_server)"]). Link :server_binary_main,
// which sets it and runs the tests.
//
// Thread safety: written once by main before any test runs, then read only.
#ifndef FURRBALLS_TESTS_COMMON_SERVER_BINARY_H_
#define FURRBALLS_TESTS_COMMON_SERVER_BINARY_H_

#include <string>

namespace furrballs::test_support {

extern std::string server_binary;

}  // namespace furrballs::test_support

#endif  // FURRBALLS_TESTS_COMMON_SERVER_BINARY_H_
