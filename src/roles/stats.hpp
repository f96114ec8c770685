// SPDX-License-Identifier: MIT
#pragma once

#include "roles/master/master.hpp"
#include "roles/schedule/engine.hpp"
#include "roles/worker/worker.hpp"
#include "roles/workflow/engine.hpp"
#include "zkco/types.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace zkd::roles {

/// A latency histogram with fixed buckets (milliseconds), cumulative like Prometheus's:
/// counts[i] counts observations <= bounds_ms[i]; the last count is +Inf (all of them).
struct latency_histogram {
    static constexpr std::array<double, 14> bounds_ms{0.5, 1,   2,   5,    10,   25,   50,
                                                      100, 250, 500, 1000, 2500, 5000, 10000};
    std::array<std::uint64_t, bounds_ms.size() + 1> counts{};
    double sum_ms = 0;

    void observe(double ms) noexcept {
        for (std::size_t i = 0; i < bounds_ms.size(); ++i) {
            if (ms <= bounds_ms[i]) {
                ++counts[i];
            }
        }
        ++counts.back();
        sum_ms += ms;
    }
    [[nodiscard]] std::uint64_t count() const noexcept { return counts.back(); }
};

/// What one zkd instance (run_node) has done, cumulative over its sessions. Written and read
/// only on the node's executor: a reader on another thread must post there first.
struct node_stats {
    std::string member;  ///< the current member id (empty between sessions)
    zkco::session_state session = zkco::session_state::connecting;
    std::uint64_t sessions = 0;     ///< sessions established (1 + rejoins)
    bool master = false;            ///< acting master now
    std::int64_t epoch = 0;         ///< the epoch while master
    std::uint64_t elected = 0;      ///< times this instance became master
    std::int64_t queue_depth = -1;  ///< pending tasks in the master's view; -1: not master
    std::int64_t max_pending = -1;  ///< the bound it publishes as master (0: none); -1: not master

    worker_stats worker;          ///< summed over sessions
    std::uint64_t succeeded = 0;  ///< results published by this worker, by state
    std::uint64_t failed = 0;
    std::uint64_t timed_out = 0;
    std::uint64_t cancelled = 0;

    master_stats master_totals;        ///< summed over terms as master
    latency_histogram assign_latency;  ///< submitted → assigned (T2 committed), as master
    /// The schedule and workflow engines that run beside the master: counters summed over
    /// terms, gauges of the current term (0 while not master).
    schedule_engine_stats schedules;
    workflow_engine_stats workflows;
};

}  // namespace zkd::roles
