// SPDX-License-Identifier: MIT
#pragma once

// The master's workers indexed for placement (docs/protocol.md §7 "Master loop"), kept up to
// date as their counts change, so that a decision costs the same with a thousand workers as
// with four: which types some worker serves, the free slots in all, and per type the workers
// that take it ordered by free slots then id, from which placement picks in O(log n).
// It picks as protocol::placer does over the same workers (least-loaded with its tie by
// round-robin and its batch mate, round-robin, random), which stays the reference
// (tests/unit/roles/master/slot_index_test.cpp compares them). No I/O.

#include "protocol/placement.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zkd::roles {

class slot_index {
public:
    /// What the master knows of one worker, as its slots count.
    struct worker {
        int capacity = 0;
        int used = 0;  ///< assignments it holds plus those on their way
        int threads = 1;
        std::vector<std::string> types;
        std::vector<std::string> unhealthy;
        /// Alive, not draining, its directory there: it counts for the types served and the
        /// free slots (master_fsm::load_window, unknown_type).
        bool open = false;
        /// Open and listed since its directory last changed: it may be picked.
        bool assignable = false;

        [[nodiscard]] int free_slots() const noexcept {
            return used < capacity ? capacity - used : 0;
        }
        [[nodiscard]] bool serves(std::string_view type) const noexcept;
        [[nodiscard]] bool takes(std::string_view type) const noexcept;
    };

    explicit slot_index(
        protocol::placement_policy policy, std::uint64_t seed = std::random_device{}()
    );

    /// Sets what is known of `id` (new or not); a worker neither open nor assignable is
    /// dropped (as erase()).
    void put(const std::string& id, const worker& w);
    /// Only its count of used slots changed (an assignment sent or answered).
    void set_used(const std::string& id, int used);
    void erase(const std::string& id);

    /// The worker as indexed; nullptr when it is not (neither open nor assignable).
    [[nodiscard]] const worker* find(std::string_view id) const;
    /// Some open worker serves `type`, free or not, healthy or not (protocol::anyone_serves).
    [[nodiscard]] bool anyone_serves(std::string_view type) const;
    [[nodiscard]] std::size_t open_workers() const { return open_; }
    /// The free slots of the open workers, and of the assignable ones.
    [[nodiscard]] long free_open() const { return free_open_; }
    [[nodiscard]] long free_assignable() const { return free_assignable_; }

    /// As protocol::placer::pick over the assignable workers that `skip` does not name (a
    /// suspect, stall_watch): the worker to give a task of `type`, nullopt when none takes it
    /// with a free slot. `skip` is asked about candidates only, so it may cost a lookup. The
    /// caller then counts the slot used (set_used). Least-loaded and round-robin cost
    /// O(log n) plus the skipped workers; random walks the type's workers with a free slot.
    std::optional<std::string> pick(
        std::string_view type,
        std::string_view batch_mate = {},
        const std::function<bool(std::string_view)>& skip = {}
    );

    [[nodiscard]] protocol::placement_policy policy() const noexcept { return policy_; }

private:
    // Per type: the assignable workers that take it and have a free slot, by free slots (most
    // first) then id, and by id alone (round-robin). The views point into workers_' keys.
    struct by_type {
        std::set<std::pair<int, std::string_view>> by_free;  // (-free, id)
        std::set<std::string_view> by_id;
    };
    using worker_map = std::map<std::string, worker, std::less<>>;

    void link(const worker_map::value_type& entry, int sign);
    [[nodiscard]] bool skipped(
        std::string_view id, const std::function<bool(std::string_view)>& skip
    ) const {
        return skip && skip(id);
    }
    // Among the type's workers with `free` free slots (any, when 0), the first not skipped
    // after last_ in id order, wrapping around.
    std::optional<std::string_view> next_in_turn(
        const by_type& t, int free, const std::function<bool(std::string_view)>& skip
    ) const;

    protocol::placement_policy policy_;
    std::mt19937_64 rng_;
    std::string last_;  // id of the worker picked last; empty before the first pick
    worker_map workers_;
    std::map<std::string, by_type, std::less<>> types_;       // types some assignable worker takes
    std::map<std::string, std::size_t, std::less<>> served_;  // open workers serving each type
    std::size_t open_ = 0;
    long free_open_ = 0;
    long free_assignable_ = 0;
};

}  // namespace zkd::roles
