// SPDX-License-Identifier: MIT
#pragma once

#include "roles/layout.hpp"
#include "roles/placement.hpp"
#include "roles/task.hpp"
#include "zkco/client.hpp"

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstdint>

namespace zkd::roles {

struct master_options {
    placement_policy policy = placement_policy::least_loaded;
    /// Tasks of a type no live worker serves fail with unknown_type after this long, while
    /// workers exist (a rolling upgrade may leave a type unserved for a moment).
    std::chrono::milliseconds unknown_type_grace{10'000};
};

/// What a master has done, for logs and tests.
struct master_stats {
    std::uint64_t assigned = 0;     ///< T2 committed
    std::uint64_t requeued = 0;     ///< T6 back to pending
    std::uint64_t lost = 0;         ///< T6 with attempts exhausted
    std::uint64_t cancelled = 0;    ///< T7 on pending tasks, or markers forwarded
    std::uint64_t rejected = 0;     ///< malformed or unknown-type tasks failed
    bool deposed = false;           ///< stopped because a newer epoch exists
};

/// Acts as master with fencing token `epoch` (from take_over) until deposed or the session
/// ends (docs/protocol.md §7 "Master loop"): rebuilds its view from ZooKeeper, requeues the
/// tasks of departed workers (T6, "lost" past the attempt limit), forwards cancellations
/// (T7), and assigns pending tasks FIFO within priority to live workers serving their type
/// with free slots (T2), every transaction batched and fenced by check(/epoch, epoch).
/// Completes when deposed, when the session is gone, or on terminal cancellation.
boost::asio::awaitable<void> run_master(
    zkco::client& zk,
    layout l,
    member_info me,
    std::int64_t epoch,
    master_options opts = {},
    master_stats* stats = nullptr
);

}  // namespace zkd::roles
