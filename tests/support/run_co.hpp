// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <optional>
#include <stdexcept>

namespace zkd::test {

/// Runs `aw` on `ioc` until it finishes (not until `ioc` runs out of work) and returns its
/// value; rethrows what it threw; throws if it is not done within `timeout`.
template <class T>
T run_co(boost::asio::io_context& ioc, boost::asio::awaitable<T> aw,
         std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)) {
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
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    ioc.restart();
    while (!done && std::chrono::steady_clock::now() < deadline) {
        ioc.run_one_until(deadline);
        if (ioc.stopped()) {
            ioc.restart();
        }
    }
    if (!done) {
        throw std::runtime_error("run_co: coroutine did not finish in time");
    }
    if (error) {
        std::rethrow_exception(error);
    }
    return std::move(*value);
}

inline void run_co(boost::asio::io_context& ioc, boost::asio::awaitable<void> aw,
                   std::chrono::steady_clock::duration timeout = std::chrono::seconds(60)) {
    auto wrapped = [](boost::asio::awaitable<void> inner) -> boost::asio::awaitable<bool> {
        co_await std::move(inner);
        co_return true;
    };
    (void)run_co(ioc, wrapped(std::move(aw)), timeout);
}

}  // namespace zkd::test
