// SPDX-License-Identifier: MIT
#pragma once

#include "protocol/layout.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace zkd::test {

/// Waits up to `limit` until `n` workers have joined as a client sees them for direct
/// placement (docs/protocol.md §6 T1): a node under /workers and its /assign/<w>. False if
/// they did not. A worker started a moment ago may not be there yet: a test whose outcome
/// depends on the client seeing it waits for this before its first submit.
inline boost::asio::awaitable<bool> workers_joined(
    zkco::client& zk, std::size_t n, std::chrono::milliseconds limit = std::chrono::seconds(30)
) {
    const auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
        std::size_t joined = 0;
        auto kids = co_await zk.get_children(std::string(protocol::layout::workers_dir()));
        for (const auto& name : kids ? kids->names : std::vector<std::string>{}) {
            auto dir = co_await zk.exists(protocol::layout::assign_dir(name));
            joined += dir && dir->has_value() ? 1 : 0;
        }
        if (joined >= n) {
            co_return true;
        }
        if (std::chrono::steady_clock::now() >= until) {
            co_return false;
        }
        boost::asio::steady_timer t(zk.get_executor(), std::chrono::milliseconds(20));
        co_await t.async_wait(boost::asio::use_awaitable);
    }
}

}  // namespace zkd::test
