// SPDX-License-Identifier: MIT
#include "reactor/task_group.hpp"

#include "support/run_co.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>

namespace ZKD_UNITY_ID {

namespace {

namespace asio = boost::asio;
using zkd::test::run_co;
using zkd::test::run_until;
using zkd::test::wait_for;
using namespace std::chrono_literals;
using zkd::reactor::task_group;

struct outcome {
    std::exception_ptr error;
    bool done = false;
};

// Spawns an awaitable, or a function object returning one (co_spawn keeps it alive, which a
// coroutine lambda's captures need), optionally bound to `signal`; records how it ended.
template <class Spawnable>
void start(
    asio::io_context& ioc, Spawnable aw, outcome& out, asio::cancellation_signal* signal = nullptr
) {
    auto handler = [&out](std::exception_ptr e) {
        out.error = e;
        out.done = true;
    };
    if (signal != nullptr) {
        asio::co_spawn(
            ioc, std::move(aw), asio::bind_cancellation_slot(signal->slot(), std::move(handler))
        );
    } else {
        asio::co_spawn(ioc, std::move(aw), std::move(handler));
    }
}

asio::awaitable<void> sleep_then_set(std::chrono::milliseconds d, bool& flag) {
    asio::steady_timer t{co_await asio::this_coro::executor, d};
    co_await t.async_wait(asio::use_awaitable);
    flag = true;
}

// Children that have reached their wait; lets a test emit only once they can see it.
int waiting = 0;

// Waits "forever"; records that cancellation ended it.
asio::awaitable<void> wait_forever(bool& cancelled) {
    asio::steady_timer t{co_await asio::this_coro::executor, asio::steady_timer::time_point::max()};
    ++waiting;
    try {
        co_await t.async_wait(asio::use_awaitable);
    } catch (const boost::system::system_error& e) {
        cancelled = e.code() == asio::error::operation_aborted;
        throw;
    }
}

asio::awaitable<void> throw_after(std::chrono::milliseconds d, std::string what) {
    asio::steady_timer t{co_await asio::this_coro::executor, d};
    co_await t.async_wait(asio::use_awaitable);
    throw std::runtime_error(what);
}

asio::awaitable<void> all_waiting(int n) {
    EXPECT_TRUE(co_await wait_for([n] { return waiting == n; }));
}

// The fixture's name is the suite's, which GoogleTest wants in CamelCase.
class ReactorTaskGroup : public ::testing::Test {  // NOLINT(readability-identifier-naming)
protected:
    void SetUp() override { waiting = 0; }
};

TEST_F(ReactorTaskGroup, JoinOnAnEmptyGroupCompletes) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    run_co(ioc, group.join());
    EXPECT_EQ(group.size(), 0u);
}

TEST_F(ReactorTaskGroup, JoinWaitsForAllChildren) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    bool a = false;
    bool b = false;
    bool c = false;
    group.spawn(sleep_then_set(1ms, a), "a");
    group.spawn(sleep_then_set(20ms, b), "b");
    group.spawn(sleep_then_set(5ms, c), "c");
    EXPECT_EQ(group.size(), 3u);

    run_co(ioc, group.join());
    EXPECT_TRUE(a);
    EXPECT_TRUE(b);
    EXPECT_TRUE(c);
    EXPECT_EQ(group.size(), 0u);
}

TEST_F(ReactorTaskGroup, SpawnKeepsAFunctionObjectAliveUntilTheChildEnds) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    int seen = 0;
    group.spawn(
        [p = std::make_unique<int>(9), &seen]() -> asio::awaitable<void> {
            asio::steady_timer t{co_await asio::this_coro::executor, 1ms};
            co_await t.async_wait(asio::use_awaitable);
            seen = *p;  // the closure outlived the suspension
        },
        "closure"
    );
    run_co(ioc, group.join());
    EXPECT_EQ(seen, 9);
}

TEST_F(ReactorTaskGroup, EmitCancelsEveryChild) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    bool cancelled[3] = {false, false, false};
    for (auto& flag : cancelled)
        group.spawn(wait_forever(flag));

    run_co(ioc, [&]() -> asio::awaitable<void> {
        co_await all_waiting(3);
        group.emit(asio::cancellation_type::terminal);
        co_await group.join();  // a cancelled child's operation_aborted is not an error
    }());
    for (bool flag : cancelled)
        EXPECT_TRUE(flag);
    EXPECT_FALSE(group.first_exception());
}

TEST_F(ReactorTaskGroup, TotalCancellationReachesOnlyChildrenThatAcceptIt) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    bool accepting_cancelled = false;
    bool default_cancelled = false;
    group.spawn([](bool& flag) -> asio::awaitable<void> {
        co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
        co_await wait_forever(flag);
    }(accepting_cancelled));
    group.spawn(wait_forever(default_cancelled));

    run_co(ioc, [&]() -> asio::awaitable<void> {
        co_await all_waiting(2);
        group.emit(asio::cancellation_type::total);
        EXPECT_TRUE(co_await wait_for([&] { return accepting_cancelled && group.size() == 1; }));
        EXPECT_FALSE(default_cancelled);
        group.emit(asio::cancellation_type::terminal);
        co_await group.join();
    }());
    EXPECT_TRUE(default_cancelled);
}

TEST_F(ReactorTaskGroup, JoinRethrowsTheFirstChildExceptionAfterAllFinished) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    bool slow_done = false;
    group.spawn(throw_after(1ms, "first"), "thrower-1");
    group.spawn(throw_after(10ms, "second"), "thrower-2");
    group.spawn(sleep_then_set(30ms, slow_done), "slow");

    try {
        run_co(ioc, group.join());
        FAIL() << "expected the child's exception";
    } catch (const std::runtime_error& e) {
        EXPECT_STREQ(e.what(), "first");
    }
    EXPECT_TRUE(slow_done);
    EXPECT_EQ(group.size(), 0u);
    EXPECT_FALSE(group.first_exception());  // join took it
    run_co(ioc, group.join());              // so a second join does not rethrow
}

TEST_F(ReactorTaskGroup, AsyncWaitLeavesTheExceptionRecorded) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    group.spawn(throw_after(1ms, "bad"), "thrower");
    run_co(ioc, [&]() -> asio::awaitable<void> {
        co_await group.async_wait(asio::use_awaitable);
    }());
    EXPECT_TRUE(group.first_exception());
}

TEST_F(ReactorTaskGroup, CancellingTheJoinerCancelsChildrenAndWaitsForThem) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    bool c1 = false;
    bool c2 = false;
    group.spawn(wait_forever(c1));
    group.spawn(wait_forever(c2));
    int children_left_when_owner_resumed = -1;

    asio::cancellation_signal owner_signal;
    outcome owner;
    start(
        ioc,
        [&]() -> asio::awaitable<void> {
            co_await group.join();
            children_left_when_owner_resumed = static_cast<int>(group.size());
        },
        owner, &owner_signal
    );
    run_co(ioc, [&]() -> asio::awaitable<void> {
        co_await all_waiting(2);
        owner_signal.emit(asio::cancellation_type::terminal);
    }());
    run_until(ioc, [&] { return owner.done; });

    EXPECT_FALSE(owner.error);
    EXPECT_TRUE(c1);
    EXPECT_TRUE(c2);
    EXPECT_EQ(children_left_when_owner_resumed, 0);
}

TEST_F(ReactorTaskGroup, JoinInACancelledOwnerStillWaits) {
    asio::io_context ioc;
    task_group group{ioc.get_executor()};
    bool child_cancelled = false;
    group.spawn(wait_forever(child_cancelled));
    bool owner_was_cancelled = false;

    asio::cancellation_signal owner_signal;
    outcome owner;
    start(
        ioc,
        [&]() -> asio::awaitable<void> {
            bool ignored = false;
            try {
                co_await wait_forever(ignored);
            } catch (const boost::system::system_error&) {
                owner_was_cancelled = true;
            }
            // Cleanup after cancellation: Asio would throw at any co_await of a cancelled
            // coroutine, so cleanup turns that off; join forwards the cancellation and waits.
            co_await asio::this_coro::throw_if_cancelled(false);
            co_await group.join();
        },
        owner, &owner_signal
    );
    run_co(ioc, [&]() -> asio::awaitable<void> {
        co_await all_waiting(2);
        owner_signal.emit(asio::cancellation_type::terminal);
    }());
    run_until(ioc, [&] { return owner.done; });

    EXPECT_TRUE(owner_was_cancelled);
    EXPECT_TRUE(child_cancelled);
    EXPECT_FALSE(owner.error);
    EXPECT_EQ(group.size(), 0u);
}

TEST_F(ReactorTaskGroup, DestroyingTheGroupCancelsRunningChildren) {
    asio::io_context ioc;
    bool cancelled = false;
    {
        task_group group{ioc.get_executor()};
        group.spawn(wait_forever(cancelled));
        while (waiting == 0)
            ioc.run_one();  // the child starts waiting
    }
    ioc.restart();
    ioc.run_for(30s);  // runs out of work: nothing was left behind
    EXPECT_TRUE(ioc.stopped());
    EXPECT_TRUE(cancelled);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
