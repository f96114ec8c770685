// SPDX-License-Identifier: MIT
#pragma once

// What a worker counts: run_worker() adds to it, roles/stats.hpp holds it for the HTTP
// metrics, tests read it.

#include <cstdint>

namespace zkd::roles {

/// What a worker has done, for logs and tests.
struct worker_stats {
    std::uint64_t started = 0;
    std::uint64_t published = 0;  ///< results written (T4 committed), retries included
    /// Of those, tries that ended with a retry (T4 "retry": the task went to the delayed tree
    /// for another try; no result, and not counted by on_published).
    std::uint64_t retried = 0;
    std::uint64_t discarded = 0;   ///< results dropped: the assignment was gone (requeued)
    std::uint64_t cancelled = 0;   ///< handlers stopped by a cancel marker
    std::uint64_t listings = 0;    ///< listings of the assignment directory
    std::uint64_t logs_read = 0;   ///< its change log read and applied instead (§6)
    std::uint64_t task_reads = 0;  ///< assignments read one by one (no data from a log)
};

}  // namespace zkd::roles
