// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>

namespace zkd::test {

/// Runs `ioc` on this thread until `done()` is true; throws if `timeout` passes first.
inline void run_until(
    boost::asio::io_context& ioc,
    const std::function<bool()>& done,
    std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)
) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!done()) {
        if (ioc.stopped()) {
            ioc.restart();
        }
        if (ioc.run_one_until(deadline) == 0 && std::chrono::steady_clock::now() >= deadline) {
            throw std::runtime_error("test deadline passed");
        }
    }
}

/// Runs `aw` on `ioc` until it finishes (not until `ioc` runs out of work) and returns its
/// value; rethrows what it threw; throws if it is not done within `timeout`. The awaitable
/// may come from an immediately invoked coroutine lambda: the closure lives until the end of
/// the full expression, after run_co returns.
template <class T>
T run_co(
    boost::asio::io_context& ioc,
    boost::asio::awaitable<T> aw,
    std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)
) {
    std::optional<T> value;
    std::exception_ptr error;
    bool done = false;
    boost::asio::co_spawn(ioc, std::move(aw), [&](std::exception_ptr e, T v) {
        error = e;
        if (!e) {
            value.emplace(std::move(v));
        }
        done = true;
    });
    run_until(
        ioc, [&] { return done; }, timeout
    );
    if (error) {
        std::rethrow_exception(error);
    }
    return std::move(*value);
}

inline void run_co(
    boost::asio::io_context& ioc,
    boost::asio::awaitable<void> aw,
    std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)
) {
    std::exception_ptr error;
    bool done = false;
    boost::asio::co_spawn(ioc, std::move(aw), [&](std::exception_ptr e) {
        error = e;
        done = true;
    });
    run_until(
        ioc, [&] { return done; }, timeout
    );
    if (error) {
        std::rethrow_exception(error);
    }
}

/// Polls `cond` from the event loop (never blocking it) every millisecond until it is true
/// (yields true) or `timeout` passes (yields false).
inline boost::asio::awaitable<bool> wait_for(
    std::function<bool()> cond,
    std::chrono::steady_clock::duration timeout = std::chrono::seconds(30)
) {
    boost::asio::steady_timer timer{co_await boost::asio::this_coro::executor};
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!cond()) {
        if (std::chrono::steady_clock::now() >= deadline) {
            co_return false;
        }
        timer.expires_after(std::chrono::milliseconds(1));
        co_await timer.async_wait(boost::asio::use_awaitable);
    }
    co_return true;
}

}  // namespace zkd::test
