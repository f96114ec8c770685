// SPDX-License-Identifier: MIT
#pragma once

#include "support/co_assert.hpp"
#include "support/run_co.hpp"
#include "support/zk_server.hpp"
#include "zkco/client.hpp"

#include <boost/asio/io_context.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace zkd::test {

/// Base fixture for tests against a real ZooKeeper: each test gets its own chroot
/// `/zkd-test/<Suite>.<Test>` on the shared server (created empty in SetUp, removed in
/// TearDown) and an io_context. TearDown checks that nothing was left waiting on it.
class zk_test : public ::testing::Test {
protected:
    void SetUp() override;
    void TearDown() override;

    /// A config for the test's chroot on `base` (the shared server by default).
    zkco::config make_config(std::chrono::milliseconds session_timeout = std::chrono::seconds(4));
    /// Runs a coroutine on ioc_ to completion (see run_co).
    /// A failed ASSERT_* inside the coroutine ends it; the failure is already recorded.
    template <class T>
    T run(
        boost::asio::awaitable<T> aw,
        std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)
    ) {
        return run_co(ioc_, std::move(aw), timeout);
    }
    void run(
        boost::asio::awaitable<void> aw,
        std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)
    ) {
        try {
            run_co(ioc_, std::move(aw), timeout);
        } catch (const fatal_failure&) {
        }
    }

    boost::asio::io_context ioc_;
    std::string base_;    ///< the server's connect string
    std::string chroot_;  ///< "/zkd-test/<Suite>.<Test>"
    bool ready_ = false;  ///< SetUp got a server and made the chroot
};

/// Deletes `path` and everything below it; no_node is fine.
boost::asio::awaitable<zkco::result<void>> remove_recursive(zkco::client& zk, std::string path);

/// Creates `path` and its missing ancestors (persistent, empty).
boost::asio::awaitable<zkco::result<void>> create_all(zkco::client& zk, std::string path);

}  // namespace zkd::test
