// SPDX-License-Identifier: MIT
#pragma once

#include "protocol/layout.hpp"
#include "protocol/placement.hpp"
#include "protocol/queue_bound.hpp"
#include "protocol/task.hpp"
#include "roles/master/master_stats.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>
#include <functional>

namespace zkd::roles {

struct master_options {
    protocol::placement_policy policy = protocol::placement_policy::least_loaded;
    /// Tasks of a type no live worker serves fail with unknown_type after this long, while
    /// workers exist (a rolling upgrade may leave a type unserved for a moment).
    std::chrono::milliseconds unknown_type_grace{10'000};
    /// Results nobody consumed are deleted this long after they were written (T8).
    std::chrono::milliseconds result_retention{24L * 3600 * 1000};
    /// How often T8 looks for expired results.
    std::chrono::milliseconds gc_interval{60'000};
    /// Most directories below /results one T8 sweep reads the stat of; the next sweep goes on
    /// from where it stopped. Bounds a sweep's cost however many clients left directories.
    std::size_t gc_dirs_per_sweep = 1'000;
    /// The bound on pending task nodes the master publishes in /master ("max_pending") for
    /// clients to keep to on submit (docs/protocol.md §7 "Client"); 0: no bound.
    std::uint64_t max_pending = protocol::default_max_pending;
    /// Whether clients may place plain tasks on workers with room themselves (docs/protocol.md
    /// §6 T1 "Direct placement"), published in /master ("direct"); false: every task goes
    /// through pending, and the master hands them all out by priority.
    bool direct_placement = true;
    /// How long a live worker may leave an assignment unmarked (not running, T3) before the
    /// master takes it back and the worker is suspect: it gets no task but a probe now and
    /// then, and /master names it so that clients placing directly skip it (stall_watch;
    /// docs/protocol.md §7 "Stalled workers"). 0: never.
    std::chrono::milliseconds unstarted_bound{10'000};
    /// How often the master refreshes the throughput figure in /master (only when it changed).
    std::chrono::milliseconds report_interval{5'000};
    /// How often the master reads the stat of every pending shard, to find children created
    /// or deleted there by a writer that keeps no change log (docs/protocol.md §7).
    std::chrono::milliseconds pending_sweep_interval{2'000};
    /// Called on the executor for each task assigned (T2 committed), with its assigned data.
    std::function<void(const protocol::task_head&)> on_assigned;
    /// Called on the executor with the number of pending tasks in the master's view, whenever
    /// it may have changed.
    std::function<void(std::size_t)> on_queue_depth;
    /// Called on the executor with true when the master starts acting, false when it stops:
    /// when it ends, and while its session is disconnected (it cannot write then, and another
    /// master may take over once the session expires), true again if it reconnects in time.
    std::function<void(bool)> on_acting;
};

/// Acts as master with fencing token `epoch` (from take_over) until deposed or the session
/// ends (docs/protocol.md §7 "Master loop"): rebuilds its view from ZooKeeper, requeues the
/// tasks of departed workers (T6, "lost" past the attempt limit), forwards cancellations
/// (T7), and assigns pending tasks FIFO within priority to live workers serving their type
/// with free slots (T2), deletes expired results (T8), and keeps the throughput figure in
/// /master current, every transaction batched and fenced by check(/epoch, epoch). Workers
/// whose node says `draining` get no new tasks. Counters in `stats` accumulate (a node may
/// pass the same stats to each of its terms).
/// Completes when deposed, when the session is gone, or on terminal cancellation.
boost::asio::awaitable<void> run_master(
    zkco::client& zk,
    protocol::layout l,
    protocol::member_info me,
    std::int64_t epoch,
    master_options opts = {},
    master_stats* stats = nullptr
);

}  // namespace zkd::roles
