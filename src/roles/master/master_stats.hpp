// SPDX-License-Identifier: MIT
#pragma once

// What the master counts: run_master() adds to it, roles/stats.hpp holds it for the HTTP
// metrics, tests and benches read it.

#include <cstddef>
#include <cstdint>

namespace zkd::roles {

/// What a master has done, for logs and tests.
struct master_stats {
    std::uint64_t assigned = 0;   ///< T2 committed
    std::uint64_t requeued = 0;   ///< T6 back to pending
    std::uint64_t lost = 0;       ///< T6 with attempts exhausted
    std::uint64_t cancelled = 0;  ///< T7 on pending tasks, or markers forwarded
    std::uint64_t rejected = 0;   ///< malformed or unknown-type tasks failed
    std::uint64_t finished = 0;   ///< assignments live workers completed
    std::uint64_t collected = 0;  ///< expired results deleted (T8)
    std::uint64_t released = 0;   ///< delayed tasks moved to pending (T10)
    bool deposed = false;         ///< stopped because a newer epoch exists (reset per term)
    /// Old empty client results directories deleted (T8; the results themselves: collected).
    std::uint64_t collected_dirs = 0;
    /// Assignments taken back from live workers that did not start them (stall_watch).
    std::uint64_t taken_back = 0;
    /// Workers suspect now: they held assignments they did not start (stall_watch).
    std::size_t suspects = 0;
    /// Delayed tasks in the master's view now (waiting, or being read or released): a gauge,
    /// set after each of its decisions; 0 once the term ends.
    std::uint64_t delayed = 0;
    /// The earliest due time (Unix ms) among those not being released now; 0: none waits.
    /// A retry known only by its name (listed, not logged) counts its id's time, a lower
    /// bound, until its node is read. 0 once the term ends.
    std::int64_t delayed_next_due_ms = 0;

    // How the master learns of pending tasks (§7 "Master loop"), for tests and benches.
    std::uint64_t shard_listings = 0;   ///< pending shards listed (the first listing of each,
                                        ///< then only when a change log cannot be applied)
    std::uint64_t shard_log_reads = 0;  ///< change logs of pending shards read and applied
    std::uint64_t task_reads = 0;       ///< pending tasks read (load), not taken from a log
    std::uint64_t tasks_from_logs = 0;  ///< pending tasks taken with the data their log held
};

}  // namespace zkd::roles
