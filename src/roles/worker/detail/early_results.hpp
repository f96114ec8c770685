// SPDX-License-Identifier: MIT
#pragma once

// When the reference worker publishes a bundle's finished tasks early (docs/protocol.md §6
// T4e), with no I/O: once a task has been finished for early_publish_after while another
// still runs, every finished task not published yet goes in one T4e. So a bundle whose tasks
// all end within early_publish_after of each other costs no extra write, and one with slow
// tasks at most one T4e per early_publish_after. worker.cpp carries it out;
// tests/unit/roles/worker/early_results_test.cpp drives it alone.

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <vector>

namespace zkd::roles {

/// How long a finished task of a bundle waits for its neighbours before it is published on
/// its own (§6 T4e "When").
inline constexpr std::chrono::milliseconds early_publish_after{10};

/// One task of a running bundle, as the early publisher sees it.
struct early_task {
    using time_point = std::chrono::steady_clock::time_point;
    bool open = true;        ///< still running, or waiting to run
    bool final = false;      ///< finished in a way no retry of the bundle runs again
    bool published = false;  ///< in a result node of its own already
    time_point ended{};      ///< when it finished (not open)
};

struct early_decision {
    std::vector<std::size_t> publish;  ///< the tasks to publish now, ascending (one T4e)
    /// Empty `publish`: when to decide again, unless a task ends before (nullopt: only then).
    std::optional<early_task::time_point> wake;
};

/// The wait decide_early is given for a bundle whose assignment node is `assignment_bytes`
/// long: early_publish_after, and 10 ms more per 16 KiB past the first, since each T4e
/// rewrites the whole node (encoded on the event loop, and written to ZooKeeper). A bundle
/// of 512 KiB so publishes at most every 330 ms.
std::chrono::milliseconds early_wait_for(std::size_t assignment_bytes) noexcept;

/// What to publish at `now`: nothing while no task is open (the bundle's own result, T4,
/// carries them) or none is finished, final and unpublished; else, once one of those has
/// been finished for `after`, all of them, but no sooner than `after` since the last T4e
/// (`last`, when there was one); before that, when to look again.
early_decision decide_early(
    const std::vector<early_task>& tasks,
    early_task::time_point now,
    std::optional<early_task::time_point> last = std::nullopt,
    std::chrono::milliseconds after = early_publish_after
);

/// The tasks of `candidates` (in order) that go in one T4e: those that `alone` says could
/// fit at all (a cheap test of a task's own size: one too large is skipped, its result goes
/// with the bundle's, and never holds back the others), then the longest run of them from
/// the first that `fits` (the exact test of the T4e's size, given the tasks it would carry;
/// larger with every task added) accepts. `fits` is called O(log n) times: each call encodes
/// the whole assignment, which may hold 512 KiB.
std::vector<std::size_t> fitting_tasks(
    const std::vector<std::size_t>& candidates,
    const std::function<bool(std::size_t)>& alone,
    const std::function<bool(const std::vector<std::size_t>&)>& fits
);

}  // namespace zkd::roles
