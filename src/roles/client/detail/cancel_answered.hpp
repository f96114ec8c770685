// SPDX-License-Identifier: MIT
// A client call that answers a cancel rather than throw it (task_client.cpp's idiom) runs
// with `throw_if_cancelled(false)`. That setting belongs to the whole chain of coroutines
// the call runs in, its caller's included: set inside a call and left so, a caller cancelled
// later would never see its own waits throw. keeping_cancel_setting() scopes it to the call.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>

#include <exception>
#include <optional>
#include <utility>

namespace zkd::roles::detail {

/// Runs `call` in the caller's coroutine and puts the caller's `throw_if_cancelled` back
/// as it was before, also when `call` throws (a scope guard: a destructor cannot co_await,
/// so the setting is restored here, after the call, before its outcome goes on). With
/// `answer`, `call` runs with `throw_if_cancelled(false)`; else with the caller's setting
/// (a call that turns it off part of the way).
template <class T>
boost::asio::awaitable<T> keeping_cancel_setting(boost::asio::awaitable<T> call, bool answer) {
    namespace this_coro = boost::asio::this_coro;
    const bool throws = co_await this_coro::throw_if_cancelled();
    if (answer) {
        co_await this_coro::throw_if_cancelled(false);
    }
    std::optional<T> out;
    std::exception_ptr failed;
    try {
        out.emplace(co_await std::move(call));
    } catch (...) {
        failed = std::current_exception();
    }
    co_await this_coro::throw_if_cancelled(throws);
    if (failed) {
        std::rethrow_exception(failed);
    }
    co_return std::move(*out);
}

/// `call` with `throw_if_cancelled(false)` (a cancel answered, not thrown), the caller's
/// setting back afterwards.
template <class T>
boost::asio::awaitable<T> answered_on_cancel(boost::asio::awaitable<T> call) {
    co_return co_await keeping_cancel_setting(std::move(call), true);
}

}  // namespace zkd::roles::detail
