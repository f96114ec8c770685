// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <vector>

namespace zkd::reactor {

/// Where a shutdown_controller is. It only moves forward.
enum class shutdown_phase {
    running,    ///< no shutdown requested
    graceful,   ///< first signal seen: draining, the grace timer runs
    terminal,   ///< the grace period ran out: what still runs was told to stop now
    immediate,  ///< second signal seen: exit now
};

/// What a shutdown_controller calls, on its executor. Each may be empty.
struct shutdown_handlers {
    /// First signal: stop taking new work and let running work finish, e.g. emit
    /// cancellation_type::total on a task_group and stop accepting tasks.
    std::function<void(int signo)> on_graceful;
    /// The grace period ran out before stop(): cancel what still runs and hand it back,
    /// e.g. emit cancellation_type::terminal.
    std::function<void()> on_grace_expired;
    /// Second signal: leave now. If empty, the process ends with std::_Exit(128 + signo).
    std::function<void(int signo)> on_immediate;
};

/// Signals and graceful shutdown (Beast's server pattern): the first SIGINT/SIGTERM calls
/// on_graceful and starts the grace timer, whose expiry calls on_grace_expired; a second
/// signal calls on_immediate. Listening starts at construction. While it listens, the
/// controller keeps its io_context busy: call stop() once shutdown is done.
///
/// Thread safety: request() may be called from any thread; everything else, including the
/// destructor, on the executor's thread (or when the io_context is not running).
class shutdown_controller {
public:
    using executor_type = boost::asio::any_io_executor;

    /// Catches `signals` (by default SIGINT and SIGTERM) from now on; only one
    /// shutdown_controller per process should catch a given signal.
    shutdown_controller(
        executor_type ex,
        std::chrono::steady_clock::duration grace,
        shutdown_handlers handlers,
        std::vector<int> signals = {SIGINT, SIGTERM}
    );
    /// Calls stop().
    ~shutdown_controller();

    shutdown_controller(const shutdown_controller&) = delete;
    shutdown_controller& operator=(const shutdown_controller&) = delete;

    /// Acts as if `signo` had arrived (programmatic shutdown, tests). Thread-safe; the
    /// handlers run later on the executor, never inline.
    void request(int signo = SIGTERM);

    /// Ends the controller's part: stops the grace timer, stops listening and gives the
    /// signals back their default action (a later SIGINT kills the process), and wakes
    /// wait_shutdown_requested(). Call it when shutdown has finished. Idempotent.
    void stop();

    [[nodiscard]] shutdown_phase phase() const noexcept;

    /// Completes once a shutdown was requested (at once if one was): yields the first signal
    /// number, or 0 if stop() came first. Cancellation (terminal): throws operation_aborted.
    /// The controller must outlive the call.
    boost::asio::awaitable<int> wait_shutdown_requested();

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace zkd::reactor
