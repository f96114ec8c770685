// SPDX-License-Identifier: MIT
#pragma once

#include "zk_local/zk_local.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

// ZooKeeper servers for integration tests.
//
// One server is shared by the whole test process: the first shared_zk_connect_string() starts it
// (standalone, tickTime 200 ms, so sessions go down to 400 ms) and it is stopped after the last
// test (a ::testing::Environment), or at exit. Servers die with the test process even when it
// crashes (PR_SET_PDEATHSIG), so no JVM is left behind. Tests share it safely by each using
// their own chroot.
//
// Environment:
//   ZKD_TEST_ZK=host:port[,...]   use this server instead of starting one
//   ZKD_REQUIRE_ZK=1 or CI=true   a missing java/ZooKeeper fails the test instead of skipping
//   ZKD_TEST_KEEP_ZK_DIR=1        keep the servers' dirs (data, logs) after the run
//
// When a test fails, the last 60 lines of each live server's log are printed to stderr: the
// listener doing it is installed automatically when this file's object is linked (any use of
// this header's functions does that); install_zk_log_on_failure() is there for custom mains
// and is idempotent. Private clusters print their log when they stop during a failed test.
namespace zkd::test {

// True when CI=true or ZKD_REQUIRE_ZK=1: a missing server is then a failure, not a skip.
[[nodiscard]] bool zk_required();

// Whether a local server can be started (java and the zookeeper package are installed); true
// when ZKD_TEST_ZK names an external server. On false, *why says what is missing.
[[nodiscard]] bool zk_server_available(std::string* why = nullptr);
// Same, but ignores ZKD_TEST_ZK: for tests that start their own cluster.
[[nodiscard]] bool local_zk_available(std::string* why = nullptr);

// True when ZKD_TEST_ZK is set.
[[nodiscard]] bool zk_server_is_external();

// Connect string of the shared server: ZKD_TEST_ZK if set, else the lazily started local one.
// Throws std::runtime_error if it cannot start. Thread-safe.
const std::string& shared_zk_connect_string();

// The shared local server, for tests that stop or restart it (stop_member(0) then
// start_member(0)). Starts it if needed. Throws std::logic_error when ZKD_TEST_ZK is set,
// as there is no local server then; guard such tests with ZKD_REQUIRE_SHARED_ZK_CLUSTER().
zk_local::cluster& shared_zk_cluster();

// Starts a cluster of its own for one test or suite (an ensemble when servers > 1), with the
// same settings as the shared one. Its log is printed when it stops during a failed test.
// Keep it in the unique_ptr (don't move the cluster out): the log printer tracks its address.
// `extra_config`: zoo.cfg lines of its own (e.g. "maxSessionTimeout=60000").
[[nodiscard]] std::unique_ptr<zk_local::cluster> start_private_cluster(
    int servers = 1, std::vector<std::string> extra_config = {}
);

// Prints the last `lines` lines of each member's log to stderr.
void print_zk_logs(const zk_local::cluster& cluster, std::size_t lines = 60);

// Appends the print-logs-on-failure listener to GoogleTest; idempotent (see above).
void install_zk_log_on_failure();

}  // namespace zkd::test

// At the top of a test body or SetUp(): skips the test when no ZooKeeper can be had, or fails
// it when zk_required() (a missing ZooKeeper in CI must fail the run).
#define ZKD_REQUIRE_ZK_SERVER() ZKD_DETAIL_REQUIRE_ZK(::zkd::test::zk_server_available)

// For tests that call start_private_cluster(): needs java even when ZKD_TEST_ZK is set.
#define ZKD_REQUIRE_LOCAL_ZK_SERVER() ZKD_DETAIL_REQUIRE_ZK(::zkd::test::local_zk_available)

// For tests that stop or restart the shared server through shared_zk_cluster(): also skips
// (never fails) when ZKD_TEST_ZK names an external server, which we cannot restart.
#define ZKD_REQUIRE_SHARED_ZK_CLUSTER()                                             \
    ZKD_DETAIL_REQUIRE_ZK(::zkd::test::local_zk_available);                         \
    if (::zkd::test::zk_server_is_external()) {                                     \
        GTEST_SKIP() << "needs the local shared ZooKeeper, but ZKD_TEST_ZK is set"; \
    }                                                                               \
    static_assert(true)

#define ZKD_DETAIL_REQUIRE_ZK(available)                                                          \
    if (std::string zkd_zk_why_; !available(&zkd_zk_why_)) {                                      \
        if (::zkd::test::zk_required()) {                                                         \
            ADD_FAILURE() << "ZooKeeper required (CI=true or ZKD_REQUIRE_ZK=1): " << zkd_zk_why_; \
            return;                                                                               \
        }                                                                                         \
        GTEST_SKIP() << zkd_zk_why_;                                                              \
    }                                                                                             \
    static_assert(true)
