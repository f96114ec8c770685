// SPDX-License-Identifier: MIT
#include "reactor/signals.hpp"

#include "reactor/task_group.hpp"
#include "support/run_co.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

namespace asio = boost::asio;
using zkd::test::run_until;
using namespace std::chrono_literals;
using zkd::reactor::shutdown_controller;
using zkd::reactor::shutdown_handlers;
using zkd::reactor::shutdown_phase;

// Records the calls the controller makes.
struct recorder {
    std::vector<int> graceful;
    int grace_expired = 0;
    std::vector<int> immediate;

    shutdown_handlers handlers() {
        return {
            .on_graceful = [this](int s) { graceful.push_back(s); },
            .on_grace_expired = [this] { ++grace_expired; },
            .on_immediate = [this](int s) { immediate.push_back(s); },
        };
    }
};

TEST(ReactorSignals, RaisedSigtermStartsGracefulShutdown) {
    asio::io_context ioc;
    recorder rec;
    shutdown_controller ctl{ioc.get_executor(), 1h, rec.handlers()};
    int requested_by = -1;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> { requested_by = co_await ctl.wait_shutdown_requested(); },
        asio::detached
    );
    EXPECT_EQ(ctl.phase(), shutdown_phase::running);

    ASSERT_EQ(::raise(SIGTERM), 0);  // caught by the controller, not fatal
    run_until(ioc, [&] { return !rec.graceful.empty() && requested_by != -1; });

    EXPECT_EQ(rec.graceful, std::vector<int>{SIGTERM});
    EXPECT_EQ(requested_by, SIGTERM);
    EXPECT_EQ(ctl.phase(), shutdown_phase::graceful);
    EXPECT_EQ(rec.grace_expired, 0);
    EXPECT_TRUE(rec.immediate.empty());
    ctl.stop();
    ioc.restart();
    ioc.run_for(30s);  // stop() left nothing behind: returns early, out of work
    EXPECT_TRUE(ioc.stopped());
}

TEST(ReactorSignals, SecondSignalTriggersImmediateExitPath) {
    asio::io_context ioc;
    recorder rec;
    shutdown_controller ctl{ioc.get_executor(), 1h, rec.handlers()};

    ASSERT_EQ(::raise(SIGINT), 0);
    run_until(ioc, [&] { return !rec.graceful.empty(); });
    ASSERT_EQ(::raise(SIGTERM), 0);
    run_until(ioc, [&] { return !rec.immediate.empty(); });

    EXPECT_EQ(rec.graceful, std::vector<int>{SIGINT});
    EXPECT_EQ(rec.immediate, std::vector<int>{SIGTERM});
    EXPECT_EQ(rec.grace_expired, 0);
    EXPECT_EQ(ctl.phase(), shutdown_phase::immediate);
}

TEST(ReactorSignals, ImmediatePhaseLeavesNothingBehind) {
    asio::io_context ioc;
    recorder rec;
    shutdown_controller ctl{ioc.get_executor(), 1h, rec.handlers()};
    ctl.request(SIGTERM);
    ctl.request(SIGINT);
    ioc.run_for(30s);  // returns early, out of work: no grace timer, no signal wait left
    EXPECT_TRUE(ioc.stopped());
    EXPECT_EQ(rec.graceful, std::vector<int>{SIGTERM});
    EXPECT_EQ(rec.immediate, std::vector<int>{SIGINT});
    EXPECT_EQ(ctl.phase(), shutdown_phase::immediate);
}

TEST(ReactorSignals, GraceExpiryTriggersTerminalCancellation) {
    asio::io_context ioc;
    zkd::reactor::task_group group{ioc.get_executor()};
    bool saw_total = false;
    bool saw_terminal = false;
    // A child that takes total cancellation as "finish what you are doing" and keeps going,
    // like a worker draining its running task, until terminal cancellation stops it.
    group.spawn([](bool& total, bool& terminal) -> asio::awaitable<void> {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        co_await asio::this_coro::throw_if_cancelled(false);
        asio::steady_timer t{co_await asio::this_coro::executor};
        for (;;) {
            t.expires_at(asio::steady_timer::time_point::max());
            co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
            const auto state = (co_await asio::this_coro::cancellation_state).cancelled();
            if ((state & asio::cancellation_type::terminal) != asio::cancellation_type::none) {
                terminal = true;
                co_return;
            }
            total = total || state != asio::cancellation_type::none;
        }
    }(saw_total, saw_terminal));

    shutdown_controller ctl{
        ioc.get_executor(),
        10ms,
        {
            .on_graceful = [&](int) { group.emit(asio::cancellation_type::total); },
            .on_grace_expired = [&] { group.emit(asio::cancellation_type::terminal); },
            .on_immediate = [](int) { FAIL() << "no second signal was sent"; },
        },
    };
    bool finished = false;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await ctl.wait_shutdown_requested();
            co_await group.join();
            ctl.stop();
            finished = true;
        },
        asio::detached
    );
    ctl.request(SIGTERM);
    run_until(ioc, [&] { return finished; });

    EXPECT_TRUE(saw_total);
    EXPECT_TRUE(saw_terminal);
    EXPECT_EQ(ctl.phase(), shutdown_phase::terminal);
}

TEST(ReactorSignals, StopBeforeTheGracePeriodEndsCancelsTheTimer) {
    asio::io_context ioc;
    recorder rec;
    shutdown_controller ctl{ioc.get_executor(), 1h, rec.handlers()};
    ctl.request(SIGINT);
    run_until(ioc, [&] { return !rec.graceful.empty(); });
    ctl.stop();
    ioc.restart();
    ioc.run_for(30s);  // returns at once: no grace timer, no signal wait left
    EXPECT_TRUE(ioc.stopped());
    EXPECT_EQ(rec.grace_expired, 0);
    EXPECT_EQ(ctl.phase(), shutdown_phase::graceful);
}

TEST(ReactorSignals, WaitYieldsZeroWhenStoppedWithoutASignal) {
    asio::io_context ioc;
    shutdown_controller ctl{ioc.get_executor(), 1h, {}};
    int result = -1;
    asio::co_spawn(
        ioc, [&]() -> asio::awaitable<void> { result = co_await ctl.wait_shutdown_requested(); },
        asio::detached
    );
    ioc.poll();
    ctl.stop();
    run_until(ioc, [&] { return result != -1; });
    EXPECT_EQ(result, 0);
}

TEST(ReactorSignals, RequestIsThreadSafe) {
    asio::io_context ioc;
    recorder rec;
    shutdown_controller ctl{ioc.get_executor(), 1h, rec.handlers()};
    std::thread other{[&] { ctl.request(SIGTERM); }};
    run_until(ioc, [&] { return !rec.graceful.empty(); });
    other.join();
    EXPECT_EQ(rec.graceful, std::vector<int>{SIGTERM});
    ctl.stop();
}

}  // namespace

}  // namespace ZKD_UNITY_ID
