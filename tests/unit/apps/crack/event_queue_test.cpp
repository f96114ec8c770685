// SPDX-License-Identifier: MIT
// The follow loop's event queue (apps/crack/detail/follow.hpp): order, the deadline, a push
// waking a waiter, and cancellation, on an io_context without a server.
#include "apps/crack/detail/follow.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <exception>
#include <optional>
#include <string>

namespace ZKD_UNITY_ID {

namespace {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using zkd::crack::partition_report;
using zkd::crack::detail::event_queue;
using zkd::crack::detail::follow_event;

std::optional<std::size_t> partition_of(const std::optional<follow_event>& ev) {
    if (!ev) {
        return std::nullopt;
    }
    const auto* report = std::get_if<partition_report>(&*ev);
    return report != nullptr ? std::optional<std::size_t>(report->partition) : std::nullopt;
}

/// Runs pop(deadline) on `ioc`, bound to `signal`, until it ends; its result.
std::optional<follow_event> run_pop(
    asio::io_context& ioc,
    event_queue& q,
    event_queue::clock::time_point deadline,
    asio::cancellation_signal& signal
) {
    std::optional<follow_event> out;
    bool done = false;
    asio::co_spawn(
        ioc, q.pop(deadline),
        asio::bind_cancellation_slot(
            signal.slot(),
            [&](std::exception_ptr e, std::optional<follow_event> ev) {
                EXPECT_FALSE(e);
                out = std::move(ev);
                done = true;
            }
        )
    );
    ioc.run_for(10s);
    EXPECT_TRUE(done) << "pop did not end";
    return out;
}

TEST(CrackEventQueue, EventsComeOutInOrder) {
    asio::io_context ioc;
    event_queue q(ioc.get_executor());
    EXPECT_FALSE(q.try_pop());
    q.push(partition_report{1, "a", std::nullopt});
    q.push(zkd::zkco::error_code(zkd::zkco::errc::no_node));
    q.push(partition_report{2, "b", std::string("{}")});
    EXPECT_EQ(partition_of(q.try_pop()), 1U);
    asio::cancellation_signal signal;
    const auto second = run_pop(ioc, q, event_queue::clock::now() + 10s, signal);
    ASSERT_TRUE(second);
    EXPECT_TRUE(std::holds_alternative<zkd::zkco::error_code>(*second));
    EXPECT_EQ(partition_of(q.try_pop()), 2U);
    EXPECT_FALSE(q.try_pop());
}

TEST(CrackEventQueue, APushWakesTheWaiterAndTheDeadlineEndsTheWait) {
    asio::io_context ioc;
    event_queue q(ioc.get_executor());
    asio::cancellation_signal signal;
    // Nothing comes: the deadline ends the wait with nothing.
    EXPECT_FALSE(run_pop(ioc, q, event_queue::clock::now() + 20ms, signal));
    ioc.restart();
    // Pushed while the pop waits (with a day's deadline): it wakes with the event.
    asio::steady_timer later(ioc, 20ms);
    later.async_wait([&](auto) { q.push(partition_report{7, "t", std::nullopt}); });
    EXPECT_EQ(partition_of(run_pop(ioc, q, event_queue::clock::now() + 24h, signal)), 7U);
}

TEST(CrackEventQueue, CancellationEndsTheWaitAndKeepsWhatComesLater) {
    asio::io_context ioc;
    event_queue q(ioc.get_executor());
    asio::cancellation_signal signal;
    // Cancelled during the wait.
    asio::steady_timer later(ioc, 20ms);
    later.async_wait([&](auto) { signal.emit(asio::cancellation_type::terminal); });
    EXPECT_FALSE(run_pop(ioc, q, event_queue::clock::now() + 24h, signal));
    q.push(partition_report{3, "t", std::nullopt});
    EXPECT_EQ(partition_of(q.try_pop()), 3U);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
