// SPDX-License-Identifier: MIT
#pragma once

#include "zkco/error.hpp"
#include "zkco/types.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <type_traits>

namespace zkd::zkco {

namespace detail {
template <class T>
struct timeout_value;
template <class T>
struct timeout_value<boost::system::result<T, error_code>> {
    static boost::system::result<T, error_code> make() {
        return error_code(errc::operation_timeout);
    }
};
template <>
struct timeout_value<multi_result> {
    static multi_result make() { return multi_result{errc::operation_timeout, {}}; }
};
}  // namespace detail

/// Runs `op` with a deadline. The C client has no per-request timeout (a request parked in
/// a disconnection waits until the connection gives up), so every role-level wait gets one.
/// On expiry the op is cancelled (terminal: its wait is abandoned, a write may still apply)
/// and the result is errc::operation_timeout, i.e. condition::retryable.
/// T is a zkco::result<U> or multi_result.
template <class T>
boost::asio::awaitable<T> with_timeout(
    boost::asio::awaitable<T> op, std::chrono::steady_clock::duration timeout
) {
    using namespace boost::asio::experimental::awaitable_operators;
    boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, timeout);
    auto outcome = co_await (
        std::move(op) || timer.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable))
    );
    if (outcome.index() == 0) {
        co_return std::move(std::get<0>(outcome));
    }
    co_return detail::timeout_value<T>::make();
}

/// Whether the calling coroutine has been cancelled.
inline boost::asio::awaitable<bool> cancelled() {
    const auto cs = co_await boost::asio::this_coro::cancellation_state;
    co_return cs.cancelled() != boost::asio::cancellation_type::none;
}

/// Waits `d`: false when cancelled, during the wait or before it. A cancellation emitted
/// before a wait begins never reaches it (the slot only signals what is pending then), so a
/// coroutine that does not throw on cancellation would otherwise sleep the whole `d`.
inline boost::asio::awaitable<bool> pause(std::chrono::steady_clock::duration d) {
    if (co_await cancelled()) {
        co_return false;
    }
    boost::asio::steady_timer t(co_await boost::asio::this_coro::executor, d);
    auto [ec] = co_await t.async_wait(boost::asio::as_tuple(boost::asio::use_awaitable));
    co_return !ec;
}

}  // namespace zkd::zkco
