// SPDX-License-Identifier: MIT
// Choosing the worker for a pending task (docs/protocol.md §7 "Master loop"). Pure: no I/O.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zkd::protocol {

enum class placement_policy {
    least_loaded,  ///< most free slots; ties by round-robin; a transaction's tasks kept
                   ///< together up to a worker's threads (the default; placer::pick)
    round_robin,   ///< the eligible workers in turn, in id order
    random,        ///< uniformly among the eligible workers
};

/// "least-loaded", "round-robin", "random".
std::string_view to_string(placement_policy p) noexcept;
std::optional<placement_policy> parse_placement_policy(std::string_view s) noexcept;

/// What the master knows of a live worker. A view: `id`, `types` and `unhealthy` point into
/// the caller's storage (the master's view of its workers), which must outlive the slot; a
/// master builds one per live worker for every decision, so with a thousand workers copies
/// of those strings would cost it more than the placing itself.
struct worker_slot {
    std::string_view id;
    int capacity = 0;
    int used = 0;                        ///< assignments the worker holds now
    std::span<const std::string> types;  ///< sorted; serves() does not rely on it
    int threads = 1;                     ///< tasks it runs side by side; 1 when it does not say
    /// Types it serves but cannot run now (its node's `unhealthy`): it gets none of them.
    std::span<const std::string> unhealthy;

    /// Free slots; never negative (a worker may hold more than its capacity after a restart).
    int free_slots() const noexcept { return used < capacity ? capacity - used : 0; }
    bool serves(std::string_view type) const noexcept;
    /// serves(type), and `type` is not unhealthy there: it may be given such a task.
    bool takes(std::string_view type) const noexcept;
};

/// True when some worker serves `type`, free or not, healthy or not: false means no live
/// worker could ever take it (§7: `unknown_type` after 10 s). A type unhealthy everywhere
/// waits.
bool anyone_serves(std::span<const worker_slot> workers, std::string_view type) noexcept;

/// Applies a placement policy. Keeps only the last worker picked (for the rotations) and the
/// random generator: deterministic given the seed and the calls. Not thread-safe.
class placer {
public:
    explicit placer(placement_policy policy, std::uint64_t seed = std::random_device{}());

    /// The index in `workers` of the worker to give a task of `type`, among those that serve it
    /// and have a free slot; nullopt when there is none. The caller then counts the slot used.
    /// Worker ids should be unique; their order in `workers` does not matter.
    ///
    /// `batch_mate` is the worker the caller's previous pick for the same transaction went to
    /// (empty for a transaction's first task). Least-loaded keeps to it while it serves the
    /// type and has no more than `threads - 1` fewer free slots than the most free worker:
    /// its threads run those tasks side by side, and tasks that one worker takes in one
    /// transaction cost one read of its change log and mostly one T4, where tasks spread one
    /// per worker cost a read and a T4 each (docs/protocol.md §7 "Master loop"). A worker of
    /// one thread (or one that does not say) is never kept to: plain least-loaded. The other
    /// policies ignore it.
    std::optional<std::size_t> pick(
        std::span<const worker_slot> workers,
        std::string_view type,
        std::string_view batch_mate = {}
    );

    placement_policy policy() const noexcept { return policy_; }

private:
    // Among the eligible workers with at least `min_free` free slots, the first after last_
    // in id order, wrapping around.
    std::optional<std::size_t> next_in_turn(
        std::span<const worker_slot> workers, std::string_view type, int min_free
    ) const;

    placement_policy policy_;
    std::mt19937_64 rng_;
    std::string last_;  ///< id of the worker picked last; empty before the first pick
};

}  // namespace zkd::protocol
