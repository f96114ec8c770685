// SPDX-License-Identifier: MIT
#include "zkco/retry.hpp"

#include <boost/asio/this_coro.hpp>

namespace asio = boost::asio;

namespace zkd::zkco {

asio::awaitable<bool> wait_connected(client& zk) {
    while (zk.state() != session_state::connected) {
        if (is_terminal(zk.state())) {
            co_return false;
        }
        if (auto change = co_await zk.wait_state(zk.state_generation()); !change) {
            co_return false;
        }
    }
    co_return true;
}

asio::awaitable<bool> reconnected_after(client& zk, error_code ec) {
    if (ec != condition::retryable || is_terminal(zk.state())) {
        co_return false;
    }
    co_return co_await wait_connected(zk);
}

asio::awaitable<bool> wait_created(client& zk, std::string path) {
    for (;;) {
        // A cancelled read's outcome is "unknown" (retryable): without this check, the retry
        // would start a new read that the cancellation, already emitted, never reaches.
        if ((co_await asio::this_coro::cancellation_state).cancelled() !=
            asio::cancellation_type::none) {
            co_return false;
        }
        auto e = co_await zk.watch_exists(path);
        if (!e) {
            const bool retry = co_await reconnected_after(zk, e.error());
            if (!retry) {
                co_return false;
            }
            continue;
        }
        if (e->value) {
            co_return true;
        }
        if ((co_await asio::this_coro::cancellation_state).cancelled() !=
            asio::cancellation_type::none) {
            co_return false;
        }
        auto fired = co_await e->watch.changed();
        co_return static_cast<bool>(fired);
    }
}

}  // namespace zkd::zkco
