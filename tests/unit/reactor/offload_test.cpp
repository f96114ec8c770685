// SPDX-License-Identifier: MIT
#include "reactor/offload.hpp"

#include "reactor/compute_pool.hpp"
#include "support/run_co.hpp"

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
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

namespace ZKD_UNITY_ID {

namespace {

namespace asio = boost::asio;
using zkd::test::run_co;
using zkd::test::run_until;
using zkd::test::wait_for;
using namespace std::chrono_literals;
using zkd::reactor::compute_pool;
using zkd::reactor::offload;
using zkd::reactor::on_cancel;
using zkd::reactor::stop_token;

// Blocks a pool thread until a stop is requested.
void block_until_stopped(const stop_token& token) {
    std::mutex m;
    std::condition_variable_any cv;
    std::unique_lock lock{m};
    cv.wait(lock, token, [] { return false; });
}

bool is_aborted(const std::exception_ptr& e) {
    try {
        std::rethrow_exception(e);
    } catch (const boost::system::system_error& ex) {
        return ex.code() == asio::error::operation_aborted;
    } catch (...) {
        return false;
    }
}

TEST(ReactorOffload, RunsOnPoolAndResumesOnIoThread) {
    asio::io_context ioc;
    compute_pool pool{2};
    const auto io_thread = std::this_thread::get_id();
    std::thread::id job_thread;
    std::thread::id resumed_thread;

    const int result = run_co(ioc, [&]() -> asio::awaitable<int> {
        const int v = co_await offload(pool, [&] {
            job_thread = std::this_thread::get_id();
            return 42;
        });
        resumed_thread = std::this_thread::get_id();
        co_return v;
    }());

    EXPECT_EQ(result, 42);
    EXPECT_NE(job_thread, io_thread);
    EXPECT_NE(job_thread, std::thread::id{});
    EXPECT_EQ(resumed_thread, io_thread);
    pool.join();  // the job counts as completed only after its completion was posted
    EXPECT_EQ(pool.completed(), 1u);
}

TEST(ReactorOffload, VoidAndMoveOnlyResults) {
    asio::io_context ioc;
    compute_pool pool{1};
    std::atomic<bool> ran{false};

    run_co(ioc, offload(pool, [&] { ran = true; }));
    EXPECT_TRUE(ran);

    auto p = run_co(ioc, offload(pool, [q = std::make_unique<int>(7)]() mutable {
                        return std::move(q);  // move-only callable and result
                    }));
    ASSERT_TRUE(p);
    EXPECT_EQ(*p, 7);
}

TEST(ReactorOffload, MoveOnlyCaptureAwaitedInACoroutine) {
    asio::io_context ioc;
    compute_pool pool{1};
    const int v = run_co(ioc, [&]() -> asio::awaitable<int> {
        // Named first: GCC 12 destroys a capturing lambda written inside co_await twice.
        auto job = [p = std::make_unique<int>(5)] { return *p * 2; };
        co_return co_await offload(pool, std::move(job));
    }());
    EXPECT_EQ(v, 10);
}

TEST(ReactorOffload, CallableGetsStopTokenWhenItAsksForOne) {
    asio::io_context ioc;
    compute_pool pool{1};
    const bool stop_requested =
        run_co(ioc, offload(pool, [](stop_token token) { return token.stop_requested(); }));
    EXPECT_FALSE(stop_requested);
}

TEST(ReactorOffload, ExceptionPropagatesToAwaiter) {
    asio::io_context ioc;
    compute_pool pool{1};
    try {
        run_co(ioc, offload(pool, []() -> int { throw std::runtime_error("boom"); }));
        FAIL() << "expected an exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "boom");
    }
}

// Spawns an awaitable<T>, or a function object returning one (co_spawn keeps it alive, which
// a coroutine lambda's captures need), with a bound cancellation signal; records the outcome.
template <class T>
struct spawned {
    asio::cancellation_signal signal;
    std::optional<T> value;
    std::exception_ptr error;
    bool done = false;

    template <class Spawnable>
    void start(asio::io_context& ioc, Spawnable s) {
        asio::co_spawn(
            ioc, std::move(s),
            asio::bind_cancellation_slot(
                signal.slot(),
                [this](std::exception_ptr e, T v) {
                    error = e;
                    if (!e)
                        value.emplace(std::move(v));
                    done = true;
                }
            )
        );
    }
};

TEST(ReactorOffload, TerminalCancellationReachesCallableAndWaitsForIt) {
    asio::io_context ioc;
    compute_pool pool{1};
    std::atomic<bool> started{false};
    std::atomic<bool> returned{false};
    spawned<int> op;
    bool returned_before_completion = false;

    op.start(ioc, offload(pool, [&](stop_token token) {
                 started = true;
                 block_until_stopped(token);
                 returned = true;
                 return 7;  // the callable decides what a cancelled run yields
             }));
    run_co(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await wait_for([&] { return started.load(); }));
        op.signal.emit(asio::cancellation_type::terminal);
    }());
    run_until(ioc, [&] {
        if (op.done)
            returned_before_completion = returned;
        return op.done;
    });

    EXPECT_TRUE(returned_before_completion);
    ASSERT_FALSE(op.error);
    EXPECT_EQ(op.value, 7);
}

TEST(ReactorOffload, CallableExceptionAfterCancellationPropagates) {
    asio::io_context ioc;
    compute_pool pool{1};
    std::atomic<bool> started{false};
    spawned<int> op;

    op.start(ioc, offload(pool, [&](stop_token token) -> int {
                 started = true;
                 block_until_stopped(token);
                 throw std::runtime_error("stopped");
             }));
    run_co(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await wait_for([&] { return started.load(); }));
        op.signal.emit(asio::cancellation_type::terminal);
    }());
    run_until(ioc, [&] { return op.done; });

    ASSERT_TRUE(op.error);
    EXPECT_THROW(std::rethrow_exception(op.error), std::runtime_error);
}

TEST(ReactorOffload, PartialCancellationReachesCallable) {
    asio::io_context ioc;
    compute_pool pool{1};
    std::atomic<bool> started{false};
    spawned<bool> op;

    op.start(ioc, [&]() -> asio::awaitable<bool> {
        // Coroutines pass only terminal cancellation on unless told otherwise.
        co_await asio::this_coro::reset_cancellation_state(asio::enable_partial_cancellation());
        co_return co_await offload(pool, [&](stop_token token) {
            started = true;
            block_until_stopped(token);
            return token.stop_requested();
        });
    });
    run_co(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await wait_for([&] { return started.load(); }));
        op.signal.emit(asio::cancellation_type::partial);
    }());
    run_until(ioc, [&] { return op.done; });

    ASSERT_FALSE(op.error);
    EXPECT_EQ(op.value, true);
}

TEST(ReactorOffload, TotalCancellationDoesNotStopARunningCallable) {
    asio::io_context ioc;
    compute_pool pool{1};
    std::atomic<bool> started{false};
    std::latch release{1};
    spawned<bool> op;

    op.start(ioc, [&]() -> asio::awaitable<bool> {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        co_return co_await offload(pool, [&](stop_token token) {
            started = true;
            release.wait();
            return token.stop_requested();
        });
    });
    run_co(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await wait_for([&] { return started.load(); }));
        op.signal.emit(asio::cancellation_type::total);
        release.count_down();  // after the emit: the callable then reads its token
    }());
    run_until(ioc, [&] { return op.done; });

    ASSERT_FALSE(op.error);
    EXPECT_EQ(op.value, false);
}

TEST(ReactorOffload, CancellationWhileQueuedSkipsTheCallable) {
    asio::io_context ioc;
    compute_pool pool{1};
    std::atomic<bool> blocker_started{false};
    std::latch release{1};
    std::atomic<bool> second_ran{false};
    spawned<int> blocker;
    spawned<int> second;

    blocker.start(ioc, offload(pool, [&] {
                      blocker_started = true;
                      release.wait();
                      return 1;
                  }));
    second.start(ioc, [&]() -> asio::awaitable<int> {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        co_return co_await offload(pool, [&] {
            second_ran = true;
            return 2;
        });
    });
    run_co(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await wait_for([&] { return blocker_started && pool.queued() == 1; }));
        // Even total cancellation is honoured: the job has had no side effects yet.
        second.signal.emit(asio::cancellation_type::total);
        EXPECT_TRUE(co_await wait_for([&] { return second.done; }));
        release.count_down();
    }());
    run_until(ioc, [&] { return blocker.done; });
    pool.join();  // the skipped job must still not run once the thread is free

    EXPECT_TRUE(is_aborted(second.error));
    EXPECT_FALSE(second_ran);
    EXPECT_EQ(blocker.value, 1);
}

TEST(ReactorOffload, AbandonCompletesAtOnceWhileCallableRuns) {
    asio::io_context ioc;
    compute_pool pool{1};
    std::atomic<bool> started{false};
    std::atomic<bool> saw_stop{false};
    std::atomic<bool> returned{false};
    std::latch release{1};
    spawned<int> op;
    bool returned_at_completion = true;

    op.start(
        ioc, offload(
                 pool,
                 [&](stop_token token) {
                     started = true;
                     block_until_stopped(token);
                     saw_stop = true;
                     release.wait();
                     returned = true;
                     return 1;
                 },
                 on_cancel::abandon
             )
    );
    run_co(ioc, [&]() -> asio::awaitable<void> {
        EXPECT_TRUE(co_await wait_for([&] { return started.load(); }));
        op.signal.emit(asio::cancellation_type::terminal);
    }());
    run_until(ioc, [&] {
        if (op.done)
            returned_at_completion = returned;
        return op.done;
    });
    EXPECT_TRUE(is_aborted(op.error));
    EXPECT_FALSE(returned_at_completion);

    release.count_down();
    pool.join();  // the detached callable finishes; its late result is dropped
    ioc.restart();
    ioc.poll();
    EXPECT_TRUE(saw_stop);
    EXPECT_TRUE(returned);
}

TEST(ReactorOffload, StoppedPoolThrowsOperationAborted) {
    asio::io_context ioc;
    compute_pool pool{1};
    pool.stop();
    pool.join();
    bool ran = false;
    try {
        run_co(ioc, offload(pool, [&] { ran = true; }));
        FAIL() << "expected operation_aborted";
    } catch (const boost::system::system_error& e) {
        EXPECT_EQ(e.code(), asio::error::operation_aborted);
    }
    EXPECT_FALSE(ran);
}

TEST(ReactorOffload, QueuedJobsOfADestroyedPoolCompleteWithOperationAborted) {
    asio::io_context ioc;
    auto pool = std::make_unique<compute_pool>(1);
    std::atomic<bool> started{false};
    std::latch release{1};
    spawned<int> blocker;
    spawned<int> queued;

    blocker.start(ioc, offload(*pool, [&] {
                      started = true;
                      release.wait();
                      return 1;
                  }));
    queued.start(ioc, offload(*pool, [] { return 2; }));
    run_co(ioc, wait_for([&] { return started && pool->queued() == 1; }));

    pool->stop();
    release.count_down();
    pool.reset();  // joins the running job, drops the queued one
    run_until(ioc, [&] { return blocker.done && queued.done; });

    EXPECT_EQ(blocker.value, 1);
    EXPECT_TRUE(is_aborted(queued.error));
}

}  // namespace

}  // namespace ZKD_UNITY_ID
