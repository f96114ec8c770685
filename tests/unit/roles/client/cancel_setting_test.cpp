// SPDX-License-Identifier: MIT
// A client call that answers a cancel instead of throwing it leaves its caller's coroutine as
// it found it (roles/client/detail/cancel_answered.hpp): a caller cancelled afterwards still
// has its next wait throw. task_client::submit() is one such call; its checks answer before
// any I/O, so no server is needed here.
#include "roles/client/detail/cancel_answered.hpp"
#include "roles/client/task_client.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <optional>
#include <stdexcept>
#include <vector>

namespace ZKD_UNITY_ID {

namespace asio = boost::asio;
using namespace zkd;
using namespace std::chrono_literals;

namespace {

/// What a caller's coroutine saw after its call: whether it throws on cancel.
struct seen {
    bool throws_before = false;
    bool throws_after = false;
    bool wait_threw = false;  ///< its wait, started after its cancel, threw at once
    bool done = false;
};

/// Runs `call` in a coroutine whose cancellation slot is bound; once the call is over the
/// coroutine is cancelled (terminal) and then waits on a timer (long, should the cancel go
/// unseen: the io_context is run for a bounded time).
seen run_caller(
    asio::io_context& io,
    std::function<asio::awaitable<void>()> call,
    asio::cancellation_signal& sig
) {
    seen s;
    auto body = [&]() -> asio::awaitable<void> {
        s.throws_before = co_await asio::this_coro::throw_if_cancelled();
        co_await call();
        s.throws_after = co_await asio::this_coro::throw_if_cancelled();
        sig.emit(asio::cancellation_type::terminal);
        asio::steady_timer t(io, 10s);
        try {
            co_await t.async_wait(asio::use_awaitable);
        } catch (const boost::system::system_error&) {
            s.wait_threw = true;
        }
        s.done = true;
        // co_spawn's last step, after the body, would throw the cancel out of run_for().
        co_await asio::this_coro::throw_if_cancelled(false);
    };
    asio::co_spawn(io, body(), asio::bind_cancellation_slot(sig.slot(), asio::detached));
    io.run_for(2s);  // the wait is 10 s: a cancel unseen leaves `done` false
    return s;
}

asio::awaitable<int> turns_it_off() {
    co_await asio::this_coro::throw_if_cancelled(false);
    co_return 7;
}

asio::awaitable<int> turns_it_off_and_throws() {
    co_await asio::this_coro::throw_if_cancelled(false);
    throw std::runtime_error("boom");
    co_return 0;
}

}  // namespace

TEST(ClientCancelSetting, ACallThatAnswersACancelLeavesItsCallerThrowing) {
    asio::io_context io;
    asio::cancellation_signal sig;
    int got = 0;
    const auto s = run_caller(
        io,
        [&]() -> asio::awaitable<void> {
            got = co_await roles::detail::answered_on_cancel(turns_it_off());
        },
        sig
    );
    EXPECT_EQ(got, 7);
    EXPECT_TRUE(s.throws_before);
    EXPECT_TRUE(s.throws_after);
    EXPECT_TRUE(s.done);
    EXPECT_TRUE(s.wait_threw);
}

TEST(ClientCancelSetting, TheSettingComesBackWhenTheCallThrows) {
    asio::io_context io;
    asio::cancellation_signal sig;
    bool threw = false;
    const auto s = run_caller(
        io,
        [&]() -> asio::awaitable<void> {
            try {
                co_await roles::detail::keeping_cancel_setting(turns_it_off_and_throws(), false);
            } catch (const std::runtime_error&) {
                threw = true;
            }
        },
        sig
    );
    EXPECT_TRUE(threw);
    EXPECT_TRUE(s.throws_after);
    EXPECT_TRUE(s.wait_threw);
}

TEST(ClientCancelSetting, WithoutItTheCallersCancelGoesUnseen) {
    // What the helper guards against: the setting is the whole coroutine chain's.
    asio::io_context io;
    asio::cancellation_signal sig;
    const auto s = run_caller(
        io, [&]() -> asio::awaitable<void> { co_await turns_it_off(); }, sig
    );
    EXPECT_FALSE(s.throws_after);
    EXPECT_FALSE(s.wait_threw);
}

TEST(ClientCancelSetting, SubmitLeavesItsCallerThrowingOnCancel) {
    asio::io_context io;
    zkco::client zk(io.get_executor(), zkco::config{});  // never connected: not needed
    std::optional<roles::task_client> client;
    client.emplace(zk, protocol::layout{});
    asio::cancellation_signal sig;
    zkco::error_code answered;
    const auto s = run_caller(
        io,
        [&]() -> asio::awaitable<void> {
            roles::submit_options opts;
            opts.retries = -1;  // refused before anything is sent
            protocol::task_spec t;
            t.type = "echo";
            std::vector<protocol::task_spec> tasks(1, t);
            auto r = co_await client->submit(std::move(tasks), opts);
            answered = r ? zkco::error_code{} : r.error();
        },
        sig
    );
    EXPECT_EQ(answered, zkco::error_code(roles::client_errc::bad_retries));
    EXPECT_TRUE(s.throws_after);
    EXPECT_TRUE(s.wait_threw);
    client.reset();
}

}  // namespace ZKD_UNITY_ID
