// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace zkd::reactor {

/// A one-shot event: set() once, and every wait() (past or future) completes. Used to say
/// "drain now" to a running node, or "the worker has left" between two coroutines.
///
/// Thread safety: use from its executor only (like an Asio timer).
class event {
public:
    explicit event(const boost::asio::any_io_executor& ex)
        : timer_(ex, boost::asio::steady_timer::time_point::max()) {}

    /// Sets the event and wakes every waiter. Idempotent.
    void set() {
        set_ = true;
        timer_.cancel();
    }

    [[nodiscard]] bool is_set() const noexcept { return set_; }

    /// Completes once the event is set (at once if it is). Yields false if cancellation
    /// (any type the caller lets through) ended the wait first.
    boost::asio::awaitable<bool> wait() {
        while (!set_) {
            auto [ec] =
                co_await timer_.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
            if (ec && !set_) {
                co_return false;  // cancelled, not set
            }
        }
        co_return true;
    }

private:
    boost::asio::steady_timer timer_;
    bool set_ = false;
};

}  // namespace zkd::reactor
