// SPDX-License-Identifier: MIT
// The Prometheus text exposition (format 0.0.4) of a zkd instance: a pure function of what the
// node, its event loop and the HTTP facade have counted. No I/O.
#pragma once

#include "reactor/lag_probe.hpp"
#include "roles/stats.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace zkd::http {

/// The Content-Type of render_metrics()'s output.
inline constexpr std::string_view metrics_content_type = "text/plain; version=0.0.4; charset=utf-8";

/// What the HTTP facade itself has counted.
struct facade_counters {
    std::uint64_t tasks_submitted = 0;  ///< tasks submitted through the facade
    /// Of those, the ones its client placed on a worker itself (docs/protocol.md §6 T1
    /// "Direct placement"), not through the master.
    std::uint64_t tasks_placed_directly = 0;
    std::map<unsigned, std::uint64_t> responses;  ///< responses sent, by HTTP status code
    /// Connections answered 503 and closed because max_connections were open.
    std::uint64_t rejected_busy = 0;
    /// Connections closed, while they waited on their client, to make room for a new one.
    std::uint64_t closed_waiting = 0;
    /// POST ?wait requests whose client left before the result came (the result is kept).
    std::uint64_t waits_abandoned = 0;
};

/// Renders every metric (each family with its HELP and TYPE lines):
///
/// Always (from `facade`):
///   zkd_tasks_submitted_total                      counter
///   zkd_tasks_placed_directly_total                counter, of those: placed on a worker
///                                                  by the facade's client, not the master
///   zkd_http_requests_total{code="200"}            counter, one sample per status code sent
///   zkd_http_rejected_total{reason="busy"}         counter, connections refused when full
///   zkd_http_rejected_total{reason="waiting"}      counter, waiting connections closed to
///                                                  make room for a new one
///   zkd_http_waits_abandoned_total                 counter, ?wait clients that left first
/// With `node`:
///   zkd_tasks_completed_total{state="succeeded|failed|timed_out|cancelled"}  counter
///   zkd_tasks_assigned_total, zkd_tasks_requeued_total, zkd_tasks_lost_total,
///   zkd_tasks_rejected_total, zkd_tasks_taken_back_total   counters (master_totals)
///   zkd_queue_depth, zkd_workers_suspect           gauges, only while master (queue_depth >= 0)
///   zkd_max_pending                                gauge, only while master (max_pending >= 0)
///   zkd_assign_latency_seconds                     histogram (buckets in seconds)
///   zkd_master                                     gauge, 0 or 1
///   zkd_master_epoch                               gauge
///   zkd_zk_session_state{state="connecting|connected|disconnected|expired|auth_failed|closed"}
///                                                  gauge, 1 for the current state, else 0
///   zkd_zk_sessions_total                          counter
///   zkd_worker_tasks_started_total, zkd_worker_results_discarded_total   counters
///   zkd_change_log_reads_total{dir="pending|assign"}, zkd_directory_listings_total{dir=...}
///                                                  counters (master_totals, worker)
///   zkd_worker_tries_retried_total                 counter, tries that ended with a retry
///                                                  (not in zkd_tasks_completed_total)
///   zkd_delayed_released_total                     counter (master_totals.released)
///   zkd_delayed_tasks, zkd_delayed_next_due_timestamp_seconds   gauges, only while master
///                                                  (the due time only while one waits)
///   zkd_schedule_firings_total, zkd_schedule_firings_late_total,
///   zkd_schedule_lateness_seconds_total, zkd_schedule_passed_total{reason="overlap|misfire"}
///                                                  counters (node.schedules)
///   zkd_schedules{state="active|paused"}, zkd_schedule_last_lateness_seconds
///                                                  gauges, only while master (the lateness
///                                                  once a firing was written)
///   zkd_workflow_tasks_launched_total, zkd_workflow_tasks_placed_total,
///   zkd_workflows_finished_total                   counters
///   zkd_workflows{state=...}, zkd_workflow_steps{state=...}   gauges, only while master
///   Every figure is read from memory: a scrape reads nothing from ZooKeeper.
/// With `lag`:
///   zkd_event_loop_lag_seconds{quantile="0.99"|"1"} summary (p99 and max of the window;
///                                                  _sum and _count of every sample)
///   zkd_event_loop_lag_last_seconds                gauge
///   zkd_event_loop_cpu_seconds_total, zkd_event_loop_cpu_wait_seconds_total   counters,
///                                                  where the kernel reports them
///                                                  (lag_stats::sched_known)
///
/// Never throws short of bad_alloc.
std::string render_metrics(
    const std::optional<roles::node_stats>& node,
    const std::optional<reactor::lag_stats>& lag,
    const facade_counters& facade
);

/// A sample value as Prometheus writes it: shortest round-trip decimal, "+Inf", "-Inf", "NaN".
std::string format_sample(double v);

}  // namespace zkd::http
