// SPDX-License-Identifier: MIT
#pragma once

#include "reactor/compute_pool.hpp"

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <type_traits>
#include <utility>

namespace zkd::reactor {

/// What a callable run by offload() polls (stop_requested()) or hooks (std::stop_callback)
/// to notice that its awaiting coroutine was cancelled. Thread-safe.
using stop_token = std::stop_token;

/// What offload() does when the awaiting coroutine is cancelled (terminal or partial) while
/// the callable runs. Either way the callable's stop_token is set first.
enum class on_cancel {
    /// Keep waiting until the callable returns, then complete with its result or exception:
    /// no compute outlives the coroutine that started it. The default.
    wait,
    /// Complete at once with operation_aborted. The callable keeps running detached on the
    /// pool and its result (or exception) is dropped.
    abandon,
};

namespace detail {

template <class F>
consteval bool takes_stop_token() {
    return std::is_invocable_v<F&&, stop_token>;
}

template <class F>
struct offload_result {
    using type = std::invoke_result_t<F&&>;
};
template <class F>
requires(takes_stop_token<F>()) struct offload_result<F> {
    using type = std::invoke_result_t<F&&, stop_token>;
};

template <class F>
using offload_result_t = std::remove_cvref_t<typename offload_result<F>::type>;

// The type-erased work item shared by the pool thread (which runs it and stores the outcome)
// and the awaiting coroutine (which reads the outcome after the completion was posted back).
class offload_job {
public:
    offload_job() = default;
    offload_job(const offload_job&) = delete;
    offload_job& operator=(const offload_job&) = delete;
    virtual ~offload_job() = default;
    virtual void run(stop_token token) noexcept = 0;
};

template <class F, class R>
class offload_job_impl final : public offload_job {
public:
    explicit offload_job_impl(F f) : f_(std::in_place, std::move(f)) {}

    void run(stop_token token) noexcept override {
        try {
            if constexpr (std::is_void_v<R>) {
                invoke(std::move(token));
            } else {
                value_.emplace(invoke(std::move(token)));
            }
        } catch (...) {
            error_ = std::current_exception();
        }
        // Destroy the callable (and its captures) on the pool thread, off the event loop.
        f_.reset();
    }

    R take() {
        if (error_)
            std::rethrow_exception(error_);
        if constexpr (!std::is_void_v<R>)
            return std::move(*value_);
    }

private:
    decltype(auto) invoke(stop_token token) {
        if constexpr (takes_stop_token<F>()) {
            return std::invoke(std::move(*f_), std::move(token));
        } else {
            return std::invoke(std::move(*f_));
        }
    }

    std::optional<F> f_;
    std::conditional_t<std::is_void_v<R>, char, std::optional<R>> value_{};
    std::exception_ptr error_;
};

// Queues `job` on `pool` and completes `handler` on `ex` (the awaiting coroutine's executor)
// once the job returned, was skipped, or was abandoned. Compiled once in offload.cpp.
void start_offload(
    compute_pool& pool,
    std::shared_ptr<offload_job> job,
    on_cancel mode,
    boost::asio::any_io_executor ex,
    boost::asio::any_completion_handler<void(boost::system::error_code)> handler
);

}  // namespace detail

// GCC 12 destroys a capturing lambda written inside a co_await expression twice (a compiler
// bug, chriskohlhoff/asio#1007): `co_await offload(pool, [v = std::move(v)] {...})` double
// frees. Name the callable first: `auto job = [...] {...}; co_await offload(pool, std::move(job));`

/// Runs `f` (`R()` or `R(stop_token)`) on a pool thread and resumes on the caller's executor,
/// never on the pool. Yields R, or rethrows what `f` threw. Cancellation of any type while `f`
/// is queued: it never runs, and this throws operation_aborted (so does a stopped pool).
/// Terminal/partial while it runs: sets the stop_token, then `mode` decides; total is ignored
/// (a running job can't be undone). `pool` must outlive the call; `f` dies on the pool thread.
template <class F>
boost::asio::awaitable<detail::offload_result_t<F>> offload(
    compute_pool& pool, F f, on_cancel mode = on_cancel::wait
) {
    using result_type = detail::offload_result_t<F>;
    auto job = std::make_shared<detail::offload_job_impl<F, result_type>>(std::move(f));
    auto ex = co_await boost::asio::this_coro::executor;
    // Named, not a temporary inside the co_await: GCC 12 destroys capturing lambdas written
    // in a co_await expression twice (chriskohlhoff/asio#1007).
    auto wait = boost::asio::async_initiate<
        const boost::asio::use_awaitable_t<>&, void(boost::system::error_code)>(
        [pool_ptr = &pool, job, mode, ex](auto handler) {
            detail::start_offload(*pool_ptr, job, mode, ex, std::move(handler));
        },
        boost::asio::use_awaitable
    );
    co_await std::move(wait);
    co_return job->take();
}

}  // namespace zkd::reactor
