// SPDX-License-Identifier: MIT
#include "reactor/reactor.hpp"

#include "reactor/offload.hpp"
#include "support/run_co.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <latch>
#include <optional>
#include <stdexcept>
#include <thread>

namespace ZKD_UNITY_ID {

namespace {

namespace asio = boost::asio;
using zkd::test::wait_for;
using namespace std::chrono_literals;
using zkd::reactor::offload;
using zkd::reactor::reactor;
using zkd::reactor::reactor_options;

// Runs `aw` on an owning reactor, then stops it; fails instead of hanging forever.
void run_on(reactor& r, asio::awaitable<void> aw) {
    std::exception_ptr error;
    bool done = false;
    asio::co_spawn(r.get_executor(), std::move(aw), [&](std::exception_ptr e) {
        error = e;
        done = true;
        r.stop();
    });
    asio::steady_timer guard{r.get_executor(), 30s};
    guard.async_wait([&](boost::system::error_code ec) {
        if (!ec)
            r.stop();
    });
    r.run();
    guard.cancel();
    ASSERT_TRUE(done) << "test deadline passed";
    if (error)
        std::rethrow_exception(error);
}

TEST(ReactorReactor, OwningReactorRunsCoroutinesAndOffloads) {
    reactor r{{.compute_threads = 2}};
    EXPECT_TRUE(r.owns_context());
    EXPECT_EQ(r.pool().size(), 2u);
    const auto io_thread = std::this_thread::get_id();
    std::thread::id job_thread;
    int result = 0;
    run_on(r, [&]() -> asio::awaitable<void> {
        result = co_await offload(r.pool(), [&] {
            job_thread = std::this_thread::get_id();
            return 3;
        });
        EXPECT_EQ(std::this_thread::get_id(), io_thread);
    }());
    EXPECT_EQ(result, 3);
    EXPECT_NE(job_thread, io_thread);
}

TEST(ReactorReactor, RunReturnsWhenOutOfWorkWithoutTheLagProbe) {
    reactor r{{.compute_threads = 1, .lag_interval = {}}};
    bool ran = false;
    asio::co_spawn(
        r.get_executor(),
        [&]() -> asio::awaitable<void> {
            co_await offload(r.pool(), [] {});
            ran = true;
        },
        [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        }
    );
    r.run();
    EXPECT_TRUE(ran);
}

TEST(ReactorReactor, EventLoopKeepsRunningWhileThePoolIsSaturated) {
    reactor r{{.compute_threads = 2, .lag_interval = 1ms, .lag_window = 100}};
    std::latch release{1};
    std::optional<std::uint64_t> samples_before;
    std::uint64_t samples_during = 0;
    std::size_t running_during = 0;

    run_on(r, [&]() -> asio::awaitable<void> {
        for (std::size_t i = 0; i < r.pool().size() + 2; ++i) {
            r.pool().post([&] { release.wait(); });
        }
        EXPECT_TRUE(co_await wait_for([&] { return r.pool().running() == r.pool().size(); }));
        samples_before = r.lag().stats().samples;
        // Timers keep firing on the loop although every pool thread is busy.
        EXPECT_TRUE(co_await wait_for([&] { return r.lag().stats().samples >= *samples_before + 5; }
        ));
        samples_during = r.lag().stats().samples;
        running_during = r.pool().running();
        release.count_down();
    }());

    EXPECT_GE(samples_during, *samples_before + 5);
    EXPECT_EQ(running_during, r.pool().size());
    const auto stats = r.lag().stats();
    EXPECT_GE(stats.max, stats.p99);
    EXPECT_GE(stats.p99.count(), 0);
}

TEST(ReactorReactor, EmbedsIntoAnExternallyOwnedIoContext) {
    asio::io_context ioc;
    std::optional<reactor> r;
    r.emplace(ioc.get_executor(), reactor_options{.compute_threads = 1, .lag_interval = 1ms});
    EXPECT_FALSE(r->owns_context());
    EXPECT_THROW(r->run(), std::logic_error);

    const auto io_thread = std::this_thread::get_id();
    std::thread::id resumed_on;
    int result = 0;
    asio::co_spawn(
        ioc,
        [&]() -> asio::awaitable<void> {
            result = co_await offload(r->pool(), [] { return 11; });
            resumed_on = std::this_thread::get_id();
            EXPECT_TRUE(co_await wait_for([&] { return r->lag().stats().samples >= 3; }));
            r->stop();  // only the probe: the embedder's io_context is not ours to stop
        },
        [](std::exception_ptr e) {
            if (e)
                std::rethrow_exception(e);
        }
    );
    ioc.run_for(30s);  // returns early once the coroutine and the (stopped) probe are done
    EXPECT_TRUE(ioc.stopped());
    EXPECT_EQ(result, 11);
    EXPECT_EQ(resumed_on, io_thread);
    r.reset();  // before the io_context, as required
}

}  // namespace

}  // namespace ZKD_UNITY_ID
