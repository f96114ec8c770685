// SPDX-License-Identifier: MIT
#pragma once

#include "reactor/compute_pool.hpp"
#include "reactor/lag_probe.hpp"

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstddef>
#include <memory>

namespace boost::asio {
class io_context;
}  // namespace boost::asio

namespace zkd::reactor {

struct reactor_options {
    /// Compute pool threads; 0 means one per core.
    std::size_t compute_threads = 0;
    /// Lag probe period; zero disables the probe.
    std::chrono::steady_clock::duration lag_interval = std::chrono::milliseconds(100);
    /// Samples the lag probe's max and p99 cover.
    std::size_t lag_window = 600;
};

/// The io_context every coordination coroutine runs on, plus the compute pool that runs
/// user work off it, plus the event-loop lag probe. Either owns its io_context (run() drives
/// it on the calling thread) or embeds into an executor an application owns and runs.
///
/// Thread safety: get_executor(), pool(), lag(), stop() from any thread.
/// Lifetime: an embedder's io_context must outlive the reactor. Destruction joins the pool
/// (waits for running jobs) before the io_context goes away.
class reactor {
public:
    using executor_type = boost::asio::any_io_executor;

    /// Owns a single-threaded io_context.
    explicit reactor(reactor_options options = {});
    /// Embeds: coordination runs on `ex`, which the caller's io_context runs. `ex` should
    /// not run handlers concurrently (one thread, or a strand).
    explicit reactor(executor_type ex, reactor_options options = {});
    ~reactor();

    reactor(const reactor&) = delete;
    reactor& operator=(const reactor&) = delete;

    [[nodiscard]] executor_type get_executor() const noexcept { return ex_; }
    [[nodiscard]] compute_pool& pool() noexcept { return pool_; }
    [[nodiscard]] const lag_probe& lag() const noexcept { return lag_; }
    /// The probe itself: an application that ends by running out of work stops it first.
    [[nodiscard]] lag_probe& lag() noexcept { return lag_; }
    [[nodiscard]] bool owns_context() const noexcept { return owned_ != nullptr; }

    /// Owning only (throws std::logic_error when embedded): runs the io_context on the
    /// calling thread until stop(), or until it runs out of work (never while the lag probe
    /// runs). Exceptions escaping a handler propagate out of run(), as with io_context.
    void run();

    /// Stops the lag probe and, when owning, the io_context: run() returns soon, pending
    /// handlers stay queued. Thread-safe.
    void stop();

private:
    std::unique_ptr<boost::asio::io_context> owned_;
    executor_type ex_;
    compute_pool pool_;  // after the io_context: destroyed (joined) first
    lag_probe lag_;
};

}  // namespace zkd::reactor
