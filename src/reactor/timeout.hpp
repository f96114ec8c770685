// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/error.hpp>
#include <boost/asio/experimental/parallel_group.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/system_error.hpp>

#include <chrono>
#include <exception>
#include <optional>
#include <utility>

namespace zkd::reactor {

namespace detail {

// co_spawn needs a default-constructible result; optional<T> is one for any T.
template <class T>
boost::asio::awaitable<std::optional<T>> wrap_optional(boost::asio::awaitable<T> op) {
    co_return std::optional<T>{co_await std::move(op)};
}

inline boost::asio::awaitable<bool> wrap_optional(boost::asio::awaitable<void> op) {
    co_await std::move(op);
    co_return true;
}

// Races `op` against a timer (Asio's timeout_watchdog, written with a parallel group because
// Boost 1.81's `||` waits for the first *success* and so turns an early exception into a
// late timeout). Both sides have finished when this returns.
template <class T, class Empty>
boost::asio::awaitable<Empty> race_timer(
    boost::asio::awaitable<T> op, std::chrono::steady_clock::duration timeout
) {
    auto ex = co_await boost::asio::this_coro::executor;
    boost::asio::steady_timer timer{ex, timeout};
    // Named steps rather than one co_await expression: GCC 12 mishandles some temporaries in
    // co_await expressions (see offload.hpp).
    auto group = boost::asio::experimental::make_parallel_group(
        boost::asio::co_spawn(ex, wrap_optional(std::move(op)), boost::asio::deferred),
        timer.async_wait(boost::asio::deferred)
    );
    auto wait =
        group.async_wait(boost::asio::experimental::wait_for_one(), boost::asio::use_awaitable);
    auto [order, op_error, op_result, timer_ec] = co_await std::move(wait);
    if (order[0] == 0) {
        if (op_error)
            std::rethrow_exception(op_error);
        co_return std::move(op_result);
    }
    // The timer finishing first with an error means it was cancelled, which only our caller's
    // cancellation does: report that, not a timeout.
    if (timer_ec)
        throw boost::system::system_error(timer_ec, "with_timeout");
    co_return Empty{};
}

}  // namespace detail

/// Awaits `op` for at most `timeout` (generic; zkco has its own ZooKeeper-specific deadline).
/// Yields op's value, or nullopt if the deadline passed first. On timeout `op` gets terminal
/// cancellation and is awaited until it finishes; its late value or exception is dropped.
/// Exceptions from `op` before the deadline propagate. Cancelling the caller cancels `op` and
/// throws (op's exception, or operation_aborted).
template <class T>
boost::asio::awaitable<std::optional<T>> with_timeout(
    boost::asio::awaitable<T> op, std::chrono::steady_clock::duration timeout
) {
    return detail::race_timer<T, std::optional<T>>(std::move(op), timeout);
}

/// with_timeout for awaitable<void>: yields true if `op` finished, false on timeout.
inline boost::asio::awaitable<bool> with_timeout(
    boost::asio::awaitable<void> op, std::chrono::steady_clock::duration timeout
) {
    return detail::race_timer<void, bool>(std::move(op), timeout);
}

}  // namespace zkd::reactor
