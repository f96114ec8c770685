// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace zkd::reactor {

/// Event-loop lag: how late a timer due every `interval` actually ran.
struct lag_stats {
    std::chrono::nanoseconds last{};  ///< the latest sample
    std::chrono::nanoseconds max{};   ///< the largest sample in the window
    std::chrono::nanoseconds p99{};   ///< the 99th percentile of the window
    std::uint64_t samples = 0;        ///< samples taken since construction
    std::chrono::nanoseconds sum{};   ///< of every sample since construction
};

/// Measures event-loop lag, a product metric (design.md §5): a timer re-armed every
/// `interval` records how late it fires; max and p99 cover the last `window` samples.
/// While started it keeps the io_context busy.
///
/// Thread safety: all members may be called from any thread.
class lag_probe {
public:
    using executor_type = boost::asio::any_io_executor;

    lag_probe(
        executor_type ex,
        std::chrono::steady_clock::duration interval = std::chrono::milliseconds(100),
        std::size_t window = 600
    );
    /// Calls stop().
    ~lag_probe();

    lag_probe(const lag_probe&) = delete;
    lag_probe& operator=(const lag_probe&) = delete;

    /// Starts sampling (from the executor, never inline). Idempotent.
    void start();
    /// Stops sampling; the pending timer is cancelled on the executor. Idempotent.
    void stop();

    /// The latest figures (zero before the first sample).
    [[nodiscard]] lag_stats stats() const noexcept;

private:
    struct impl;
    std::shared_ptr<impl> impl_;
};

}  // namespace zkd::reactor
