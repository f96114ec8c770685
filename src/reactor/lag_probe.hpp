// SPDX-License-Identifier: MIT
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

namespace zkd::reactor {

/// Event-loop lag: how late a timer due every `interval` actually ran.
struct lag_stats {
    std::chrono::nanoseconds last{};  ///< the latest sample
    std::chrono::nanoseconds max{};   ///< the largest sample in the window
    std::chrono::nanoseconds p99{};   ///< the 99th percentile of the window
    std::uint64_t samples = 0;        ///< samples taken since construction
    std::chrono::nanoseconds sum{};   ///< of every sample since construction

    /// Whether the loop thread's scheduler counters below are known (Linux with
    /// /proc/thread-self/schedstat, the loop run by one thread).
    bool sched_known = false;
    /// Since the probe's first sample: the loop thread's time on a CPU, and its time
    /// runnable but waiting for one. A lag while the thread waited is the machine's load,
    /// not the loop's work; the two tell them apart over any span.
    std::chrono::nanoseconds cpu_total{};
    std::chrono::nanoseconds cpu_wait_total{};
};

/// A thread's scheduler counters (/proc/thread-self/schedstat).
struct sched_counters {
    std::chrono::nanoseconds on_cpu{};  ///< time it ran
    std::chrono::nanoseconds waited{};  ///< time it was runnable, waiting for a CPU
};

/// Parses schedstat's text, "ON_CPU_NS WAITED_NS TIMESLICES\n"; nullopt if malformed.
[[nodiscard]] std::optional<sched_counters> parse_schedstat(std::string_view text) noexcept;

/// The 99th percentile and the max of `values` (reordered); {0, 0} when empty.
struct p99_max {
    std::int64_t p99 = 0;
    std::int64_t max = 0;
};
[[nodiscard]] p99_max percentile_99_and_max(std::vector<std::int64_t>& values) noexcept;

/// Measures event-loop lag, a product metric (design.md §5): a timer re-armed every
/// `interval` records how late it fires; max and p99 cover the last `window` samples.
/// While started it keeps the io_context busy.
///
/// A sample mixes two causes: handlers that ran long (the loop's work) and the loop's
/// thread waiting for a CPU (the machine's load). Where the kernel reports the thread's
/// scheduler counters, each sample also reads them (lag_stats::cpu_total, cpu_wait_total).
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
