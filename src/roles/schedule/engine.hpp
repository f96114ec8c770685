// SPDX-License-Identifier: MIT
// The schedule engine: the elected master's shell over schedule::plan (docs/protocol.md §12).
#pragma once

#include "protocol/layout.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>

namespace zkd::roles {

struct schedule_engine_options {
    /// The master's result retention: a previous firing without a result that is older than
    /// this no longer holds --no-overlap back (T8 may have collected its result).
    std::chrono::milliseconds retention{24L * 3600 * 1000};
    /// Results of a schedule's firings kept: past this, the oldest are deleted, looked at
    /// every `cleanup_every` firings (a schedule's results directory stays small).
    std::size_t keep_results = 100;
    std::uint64_t cleanup_every = 500;
    /// Firings go out at most this often: what falls due meanwhile goes in the next batch
    /// (schedules due at scattered moments cost a few transactions a second, not one each),
    /// at most this late.
    std::chrono::milliseconds batch_window{20};
};

/// What the engine has done, for logs and tests.
struct schedule_engine_stats {
    std::uint64_t adopted = 0;  ///< schedule documents read (each read again counts)
    std::uint64_t garbage = 0;  ///< documents that are not one (logged, left alone)
    std::uint64_t fired = 0;    ///< firings' tasks created
    std::uint64_t skipped = 0;  ///< due times passed over by --no-overlap
    std::uint64_t missed = 0;   ///< due times passed over by the misfire policy
    std::uint64_t writes = 0;   ///< S4 transactions committed
    /// Of the firings created, those written more than late_after_ms after their due time.
    std::uint64_t late = 0;
    /// Over the firings created: the time each was written less its due time (ms), summed.
    std::uint64_t lateness_ms_sum = 0;
    /// The latest firing's lateness (ms); -1: none yet under this engine.
    std::int64_t last_lateness_ms = -1;
    /// Gauges, kept while the engine runs (0 once it stops): the schedules in its view
    /// (documents it could read; paused included), and of those the paused ones.
    std::size_t schedules = 0;
    std::size_t paused = 0;
};

/// A firing written more than this after its due time counts as late.
inline constexpr std::int64_t late_after_ms = 1000;

/// Fires every schedule of the namespace as the master of epoch `epoch` (from take_over):
/// reads /schedules (and follows its change notes), keeps one timer for the earliest due
/// time, and writes the firings due together in batched S4 transactions fenced by
/// check(/epoch, epoch). Runs until cancelled (the node cancels it when the master stops
/// acting); deposed, it stops firing and waits for that.
boost::asio::awaitable<void> run_schedules(
    zkco::client& zk,
    protocol::layout l,
    std::int64_t epoch,
    schedule_engine_options opts = {},
    schedule_engine_stats* stats = nullptr
);

}  // namespace zkd::roles
