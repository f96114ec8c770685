// SPDX-License-Identifier: MIT
// Where a client, or the workflow engine, places a plain task itself: on a worker with room,
// from its own read of the workers (docs/protocol.md §6 T1 "Direct placement", §11.4 W2).
// Pure: no I/O.
#pragma once

#include "protocol/task.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::protocol {

/// A worker as a client (or the workflow engine) read it, for direct placement.
struct worker_seen {
    std::string id;              ///< the name under /workers
    std::int32_t version = 0;    ///< its node's data version: what the T1 checks
    protocol::member_info info;  ///< its node, decoded (decode_worker)
    std::int32_t held = 0;       ///< children of /assign/<id>: the tasks it holds
};

/// The workers a client reads for direct placement out of `names` (the children of
/// /workers): all of them, or in a cluster of more than `most`, `most` of them in name order
/// from `at` on (wrapping), `at` then moving on by `most`: a bounded cost per read, and
/// every worker gets its turn.
std::vector<std::string> worker_window(
    std::vector<std::string> names, std::size_t& at, std::size_t most
);

/// Where a client places a plain task itself (docs/protocol.md §6 T1 "Direct placement"),
/// decided from its last read of the workers, with no I/O.
///
/// A read gives each live worker a budget: its capacity less what it holds (this client's
/// tasks placed there and not settled included: at least those). A plain task goes directly
/// to a worker that serves its type, is not draining and has budget left, and takes one:
/// the turn's worker (the tasks of one transaction go to one worker, which then reads one
/// change log for them), else the one with the most budget; the task's result read (settled) gives
/// it back. With no budget left the task goes to pending, and the master places it once a worker
/// has room. Nothing is placed while nothing was read.
class direct_placer {
public:
    struct target {
        std::string worker;
        std::int32_t version = 0;
    };

    /// A read of the workers (those that are not ephemeral, or whose node is not a worker's,
    /// are the caller's to leave out), with the suspects /master names (sorted): they get
    /// nothing (docs/protocol.md §7 "Stalled workers"). Tasks placed before the read before
    /// it are forgotten: they are in the workers' counts, or finished.
    void read(std::vector<worker_seen> workers, const std::vector<std::string>& suspects = {});
    /// Where a plain task of `type` goes directly, or nullopt (to pending). `turn` (the
    /// transaction it goes in) picks the worker tried first; `prefer`, when not empty, is
    /// tried before it (the workflow engine's own worker, docs/protocol.md §11.4). A target
    /// given takes one of the worker's budget: call placed() with the task's id.
    std::optional<target> place(
        std::string_view type, std::uint64_t turn, std::string_view prefer = {}
    );
    /// The task `tid` went to `worker` (place()'s target) and is on its way.
    void placed(const std::string& tid, const std::string& worker);
    /// The result of `tid` was read, or its direct submit was redirected: the budget it took
    /// is free again (nothing happens for a task not placed directly, or forgotten).
    void settled(const std::string& tid);

    /// The compute threads of the workers of the last read that take tasks (not draining,
    /// not suspects; a worker that does not say counts 1): how many tasks they run side by
    /// side, which automatic bundles spread over (plan_auto_bundles). 0 before any read.
    [[nodiscard]] std::size_t threads() const noexcept { return threads_; }

    /// The budget `worker` has left (0 for a worker not in the view), for tests.
    [[nodiscard]] int budget(std::string_view worker) const;

private:
    struct entry {
        worker_seen seen;
        int budget = 0;
    };
    struct placement {
        std::string worker;
        std::uint64_t read = 0;  // reads_ when it was placed
    };
    std::vector<entry> workers_;
    std::uint64_t reads_ = 0;
    std::size_t threads_ = 0;
    std::map<std::string, placement, std::less<>> placed_;  // by task id, until settled
};

}  // namespace zkd::protocol
