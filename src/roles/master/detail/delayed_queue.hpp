// SPDX-License-Identifier: MIT
#pragma once

// The master's view of the delayed tasks (docs/protocol.md §6 T10), with no I/O: each
// /delayed/<s> child by name, with the earliest time it may be due, in a min-heap, so that
// one timer for the earliest is all the waiting costs. A name's due time comes from its
// change-log entry (`due_ms`, exact) or, for a name only listed, from its task id (the id's
// time, which a client submitting a delayed task sets to its due time: a lower bound, for a
// retry's node keeps its id and is due later). A task whose lower bound has passed is read;
// its data says its due time (set_due) when that is still to come. About 100 bytes a task
// (a map node and a heap slot): docs/performance.md.

#include "roles/master/detail/task_key.hpp"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace zkd::roles {

class delayed_queue {
public:
    /// A delayed task whose time has come (to read, then release).
    struct due_task {
        std::string name;
        std::uint32_t shard = 0;
    };

    /// `shard` lists `names`: names not known are added (due: their id's time, a lower
    /// bound; 0 for a name that is no task id, read at once), known names of the shard that
    /// are not listed are forgotten (someone deleted them), unless in flight.
    void listed(std::uint32_t shard, const std::vector<std::string>& names);
    /// `shard`'s change log names `name`, created with due time `due_ms` (nullopt: the entry
    /// said none; the id's time is taken, a lower bound). A known name is left as it is.
    void logged(std::uint32_t shard, const std::string& name, std::optional<std::int64_t> due_ms);
    /// Its node was found due later than thought (its data's `due_ms`): waits till then.
    void set_due(const std::string& name, std::int64_t due_ms);
    /// A read or release of it failed: back in the queue, due again at `retry_ms`.
    void put_back(const std::string& name, std::int64_t retry_ms);
    /// Marked in flight (its cancel is out): not handed out till put_back or forget.
    void hold(const std::string& name);
    /// Gone: released, cancelled, deleted by someone.
    void forget(const std::string& name);

    /// Up to `most` tasks due at `now_ms` (due time ≤ now), earliest first, marked in
    /// flight (not handed out again until put_back or set_due).
    std::vector<due_task> take_due(std::int64_t now_ms, std::size_t most);
    /// The earliest due time of a task not in flight; nullopt when none waits.
    [[nodiscard]] std::optional<std::int64_t> next_due();

    [[nodiscard]] bool contains(const std::string& name) const;
    /// Its shard, when known.
    [[nodiscard]] std::optional<std::uint32_t> shard_of(const std::string& name) const;
    [[nodiscard]] bool in_flight(const std::string& name) const;
    [[nodiscard]] std::size_t size() const noexcept { return tasks_.size(); }
    /// Heap slots, the stale ones included (for tests and the memory figure).
    [[nodiscard]] std::size_t heap_size() const noexcept { return heap_.size(); }

private:
    struct entry {
        std::int64_t due = 0;
        std::uint32_t shard = 0;
        bool in_flight = false;
    };
    using slot = std::pair<std::int64_t, task_key>;  // (due, name): the heap's order
    struct later {
        bool operator()(const slot& a, const slot& b) const noexcept {
            return a.first != b.first ? a.first > b.first : b.second < a.second;
        }
    };

    void push(std::int64_t due, const task_key& key);
    /// Drops stale slots from the heap's top: a slot is live when its task is known, not in
    /// flight, and due at the slot's time.
    void clean_top();
    /// The heap is rebuilt from tasks_ when stale slots outnumber live ones.
    void compact_if_stale();

    std::map<task_key, entry> tasks_;
    std::vector<slot> heap_;  // a min-heap by `later`, with stale slots skipped
};

}  // namespace zkd::roles
