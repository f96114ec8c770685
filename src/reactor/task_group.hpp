// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_type.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <exception>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>

namespace zkd::reactor {

/// A callable that starts a coroutine: what task_group::spawn accepts besides an awaitable.
template <class F>
concept awaitable_factory = std::is_invocable_r_v<boost::asio::awaitable<void>, F&>;

/// A structured group of coroutines (Beast's task_group): each child gets its own
/// cancellation signal and removes itself when it finishes; emit() cancels all, join() waits
/// for all. Awaiting join() is what guarantees no child outlives its owner.
///
/// Thread safety: none. Use it only from its executor, which must not run handlers
/// concurrently (an io_context run by one thread, or a strand).
/// Lifetime: destroy it on its executor's thread, before the io_context. Children still
/// running then get terminal cancellation and finish on their own.
class task_group {
public:
    using executor_type = boost::asio::any_io_executor;

    explicit task_group(executor_type ex);
    ~task_group();

    task_group(const task_group&) = delete;
    task_group& operator=(const task_group&) = delete;

    [[nodiscard]] executor_type get_executor() const noexcept;

    /// Starts `child` on the group's executor (not inline). `name` labels it in logs. A child
    /// ending with an exception is logged; the first one, unless it is a system_error with
    /// operation_aborted (the normal end of a cancelled child), is kept for join().
    void spawn(boost::asio::awaitable<void> child, std::string name = {});

    /// spawn() for a function object returning awaitable<void>; it and its captures live until
    /// the child finishes: `group.spawn([self = shared_from_this()] { return self->run(); })`.
    template <awaitable_factory F>
    void spawn(F f, std::string name = {}) {
        spawn(call_and_await(std::move(f)), std::move(name));
    }

    /// Emits `type` on every running child's signal. A child coroutine sees only the types
    /// its cancellation filter lets through (terminal by default; total needs
    /// reset_cancellation_state(enable_total_cancellation())).
    void emit(boost::asio::cancellation_type type);

    /// Children that have not finished yet.
    [[nodiscard]] std::size_t size() const noexcept;

    /// The first recorded child exception (see spawn), or null. join() clears it.
    [[nodiscard]] std::exception_ptr first_exception() const noexcept;

    /// Completes with no error once the group has no children (at once if it has none, but
    /// never inline). Cancellation (any type) is forwarded to the children via emit() and the
    /// wait goes on: it cannot be abandoned. Does not touch first_exception().
    template <class CompletionToken>
    auto async_wait(CompletionToken&& token) {
        return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
            [](auto handler, std::shared_ptr<impl> group) {
                async_wait_impl(std::move(group), std::move(handler));
            },
            token, impl_
        );
    }

    /// Waits for all children, then rethrows (and clears) the first recorded child exception.
    /// Cancellation of the awaiting coroutine, during the wait or before it, is forwarded to
    /// the children and join keeps waiting. A coroutine already cancelled must first turn off
    /// this_coro::throw_if_cancelled (as cleanup paths do), or Asio throws operation_aborted
    /// at the co_await before join runs. The group must outlive the call.
    boost::asio::awaitable<void> join();

private:
    struct impl;

    // The coroutine frame owns `f`, so the closure outlives the awaitable it returned.
    template <class F>
    static boost::asio::awaitable<void> call_and_await(F f) {
        co_await f();
    }

    static void async_wait_impl(
        std::shared_ptr<impl> group,
        boost::asio::any_completion_handler<void(boost::system::error_code)> handler
    );

    std::shared_ptr<impl> impl_;
};

}  // namespace zkd::reactor
