// SPDX-License-Identifier: MIT
// zkco's waits: a pause ends at once when its coroutine was cancelled before it began.
#include "zkco/deadline.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

/// A coroutine that does not throw on cancellation, waits out a first pause (cancelled
/// during it), then starts a second, long one: the shape of a probe that was cancelled
/// while it ran.
asio::awaitable<void> two_pauses(std::optional<bool>& first, std::optional<bool>& second) {
    co_await asio::this_coro::throw_if_cancelled(false);
    first = co_await zkd::zkco::pause(10s);
    second = co_await zkd::zkco::pause(24h);
}

TEST(ZkcoPause, ACancellationBeforeAPauseEndsItAtOnce) {
    asio::io_context io;
    asio::cancellation_signal stop;
    std::optional<bool> first;
    std::optional<bool> second;
    bool done = false;
    asio::co_spawn(
        io, two_pauses(first, second),
        asio::bind_cancellation_slot(stop.slot(), [&](const std::exception_ptr&) { done = true; })
    );
    io.run_for(20ms);
    ASSERT_FALSE(done);
    stop.emit(asio::cancellation_type::terminal);
    io.run_for(5s);  // returns as soon as the coroutine ends
    ASSERT_TRUE(done) << "the second pause did not see the earlier cancellation";
    EXPECT_EQ(first, false);
    EXPECT_EQ(second, false);
}

TEST(ZkcoPause, AnUncancelledPauseWaitsItsTime) {
    asio::io_context io;
    std::optional<bool> waited;
    const auto start = std::chrono::steady_clock::now();
    asio::co_spawn(
        io, [&]() -> asio::awaitable<void> { waited = co_await zkd::zkco::pause(30ms); },
        asio::detached
    );
    io.run();
    EXPECT_EQ(waited, true);
    EXPECT_GE(std::chrono::steady_clock::now() - start, 30ms);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
