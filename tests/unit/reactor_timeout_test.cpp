// SPDX-License-Identifier: MIT
#include "reactor/compute_pool.hpp"
#include "support/run_co.hpp"
#include "reactor/offload.hpp"
#include "reactor/timeout.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

namespace asio = boost::asio;
using zkd::test::run_until;
using zkd::test::run_co;
using namespace std::chrono_literals;
using zkd::reactor::with_timeout;



asio::awaitable<int> value_after(std::chrono::milliseconds d, int v) {
    asio::steady_timer t{co_await asio::this_coro::executor, d};
    co_await t.async_wait(asio::use_awaitable);
    co_return v;
}

struct forever_state {
    bool started = false;
    bool cancelled = false;
};

asio::awaitable<std::string> forever(forever_state& st) {
    asio::steady_timer t{co_await asio::this_coro::executor, asio::steady_timer::time_point::max()};
    st.started = true;
    try {
        co_await t.async_wait(asio::use_awaitable);
    } catch (const boost::system::system_error&) {
        st.cancelled = true;
        throw;
    }
    co_return "unreachable";
}

asio::awaitable<void> void_after(std::chrono::milliseconds d) {
    asio::steady_timer t{co_await asio::this_coro::executor, d};
    co_await t.async_wait(asio::use_awaitable);
}

TEST(ReactorTimeout, YieldsTheValueBeforeTheDeadline) {
    asio::io_context ioc;
    EXPECT_EQ(run_co(ioc, with_timeout(value_after(1ms, 5), 1h)), std::optional<int>{5});
}

TEST(ReactorTimeout, YieldsNulloptAndCancelsTheOperationOnTimeout) {
    asio::io_context ioc;
    forever_state st;
    bool cancelled_when_returned = false;
    const auto r = run_co(ioc, [&]() -> asio::awaitable<std::optional<std::string>> {
        auto v = co_await with_timeout(forever(st), 5ms);
        cancelled_when_returned = st.cancelled;
        co_return v;
    }());
    EXPECT_FALSE(r.has_value());
    EXPECT_TRUE(st.started);
    EXPECT_TRUE(cancelled_when_returned);  // the operation finished before with_timeout did
}

TEST(ReactorTimeout, AnEarlyExceptionPropagatesWithoutWaitingForTheDeadline) {
    asio::io_context ioc;
    // With a one-hour deadline, only an immediate rethrow finishes within the test deadline.
    auto failing = []() -> asio::awaitable<int> {
        co_await asio::this_coro::executor;
        throw std::runtime_error("early");
    };
    EXPECT_THROW(run_co(ioc, with_timeout(failing(), 1h)), std::runtime_error);
}

TEST(ReactorTimeout, VoidOperationsYieldWhetherTheyFinished) {
    asio::io_context ioc;
    EXPECT_TRUE(run_co(ioc, with_timeout(void_after(1ms), 1h)));
    EXPECT_FALSE(run_co(ioc, with_timeout(void_after(1h), 5ms)));
}

TEST(ReactorTimeout, CancellingTheCallerIsNotATimeout) {
    asio::io_context ioc;
    forever_state st;
    asio::cancellation_signal signal;
    std::exception_ptr error;
    bool done = false;
    asio::co_spawn(
        ioc, with_timeout(forever(st), 1h),
        asio::bind_cancellation_slot(
            signal.slot(),
            [&](std::exception_ptr e, std::optional<std::string>) {
                error = e;
                done = true;
            }
        )
    );
    run_until(ioc, [&] { return st.started; });
    signal.emit(asio::cancellation_type::terminal);
    run_until(ioc, [&] { return done; });

    ASSERT_TRUE(error);
    try {
        std::rethrow_exception(error);
    } catch (const boost::system::system_error& e) {
        EXPECT_EQ(e.code(), asio::error::operation_aborted);
    }
    EXPECT_TRUE(st.cancelled);
}

TEST(ReactorTimeout, TimingOutAnOffloadStopsTheCallableAndWaitsForIt) {
    asio::io_context ioc;
    zkd::reactor::compute_pool pool{1};
    std::atomic<bool> started{false};
    std::atomic<bool> returned{false};
    bool started_when_timed_out = false;
    bool returned_when_timed_out = false;

    const auto r = run_co(ioc, [&]() -> asio::awaitable<std::optional<int>> {
        auto v = co_await with_timeout(
            zkd::reactor::offload(
                pool,
                [&](zkd::reactor::stop_token token) {
                    started = true;
                    std::mutex m;
                    std::condition_variable_any cv;
                    std::unique_lock lock{m};
                    cv.wait(lock, token, [] { return false; });
                    returned = true;
                    return 1;
                }
            ),
            5ms
        );
        started_when_timed_out = started;
        returned_when_timed_out = returned;
        co_return v;
    }());
    pool.join();
    EXPECT_FALSE(r.has_value());
    // Either the deadline came before the pool picked the job up (then it never runs), or the
    // callable saw its stop_token and had returned before with_timeout completed.
    EXPECT_EQ(started_when_timed_out, returned_when_timed_out);
    EXPECT_EQ(started.load(), started_when_timed_out);
}

}  // namespace
