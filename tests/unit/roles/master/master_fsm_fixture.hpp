// SPDX-License-Identifier: MIT
#pragma once

// What the master_fsm tests share (tests/unit/roles/master/master_fsm_*_test.cpp): task ids and
// node data as the wire has them, answers to transactions, the actions of a step by kind, and
// the MasterFsm fixture, whose helpers each send one event through on().
#include "protocol/ids.hpp"
#include "roles/master/detail/master_fsm.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

namespace zkd::roles::fsm_test {

using namespace zkd::roles::master_saw;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

// Task ids of §3: t<9 - priority>-<ms>-<client><counter>; they sort FIFO within priority.
inline std::string tid(int priority, int n) {
    return "t" + std::to_string(9 - priority) + "-1763733600123-3fa9c2d1" +
           std::string(6 - std::to_string(n).size(), '0') + std::to_string(n);
}

inline std::string worker_data(
    int capacity,
    std::vector<std::string> types,
    bool draining = false,
    std::optional<int> threads = std::nullopt
) {
    protocol::member_info w;
    w.id = "w";
    w.host = "h";
    w.pid = 1;
    w.capacity = capacity;
    w.threads = threads;
    w.types = std::move(types);
    w.started_ms = 1;
    w.draining = draining;
    w.features = protocol::own_features();  // a worker of this zkd
    return protocol::encode(w);
}

inline std::string task_data(std::string type = "echo", int attempt = 1, int max_attempts = 3) {
    protocol::task_node t;
    t.task.type = std::move(type);
    t.task.args = "x";
    t.assigned.attempt = attempt;
    t.task.max_attempts = max_attempts;
    t.task.submitted_ms = 1763733600123;
    return protocol::encode(t);
}

inline master_txn_report committed(std::size_t ops) {
    return {
        protocol::txn_answer{false, std::vector<protocol::op_code>(ops, protocol::op_code::ok)},
        false,
        {}};
}

/// A failure of op `at` of `ops` with `code`.
inline master_txn_report failed(
    std::size_t ops, std::size_t at, protocol::op_code code, bool retryable = false
) {
    master_txn_report r{
        protocol::txn_answer{true, std::vector<protocol::op_code>(ops, protocol::op_code::not_run)},
        retryable, "some error"};
    for (std::size_t i = 0; i < at; ++i) {
        r.answer.per_op[i] = protocol::op_code::ok;
    }
    r.answer.per_op[at] = code;
    return r;
}

/// A lost answer: no per-op results.
inline master_txn_report unknown() {
    return {protocol::txn_answer{true, {}}, true, "connection loss"};
}

/// The kinds of action, as arguments of of_kind().
namespace kind {
constexpr std::type_identity<master_do::read_tasks> read_tasks{};
constexpr std::type_identity<master_do::assign> assign{};
constexpr std::type_identity<master_do::reject> reject{};
constexpr std::type_identity<master_do::cancel> cancel{};
constexpr std::type_identity<master_do::clear_below> clear_below{};
constexpr std::type_identity<master_do::read_workers> read_workers{};
constexpr std::type_identity<master_do::follow_worker> follow_worker{};
constexpr std::type_identity<master_do::list_departed> list_departed{};
constexpr std::type_identity<master_do::read_departed> read_departed{};
constexpr std::type_identity<master_do::requeue_task> requeue_task{};
constexpr std::type_identity<master_do::remove_departed> remove_departed{};
constexpr std::type_identity<master_do::remove_marker> remove_marker{};
constexpr std::type_identity<master_do::write_master> write_master{};
constexpr std::type_identity<master_do::read_assignments> read_assignments{};
constexpr std::type_identity<master_do::take_back> take_back{};
constexpr std::type_identity<master_do::stat_result_dirs> stat_result_dirs{};
constexpr std::type_identity<master_do::list_results> list_results{};
constexpr std::type_identity<master_do::stat_results> stat_results{};
constexpr std::type_identity<master_do::collect> collect{};
}  // namespace kind

/// The actions of one kind a step holds, in order.
template <class Action>
inline std::vector<Action> of_kind(const master_step& s, std::type_identity<Action> /*kind*/) {
    std::vector<Action> out;
    for (const auto& a : s.actions) {
        if (const auto* x = std::get_if<Action>(&a)) {
            out.push_back(*x);
        }
    }
    return out;
}

/// The departed workers whose tasks a step starts to take back (T6: it lists their
/// directories).
inline std::vector<std::string> requeued(const master_step& s) {
    std::vector<std::string> out;
    for (const auto& a : of_kind(s, kind::list_departed)) {
        out.push_back(a.worker);
    }
    return out;
}

/// Lists every pending shard empty: until each was listed once, the fsm decides nothing.
inline void list_all_shards(master_fsm& f, clock_type::time_point now) {
    for (std::uint32_t s = 0; s < protocol::layout{}.pending_shards; ++s) {
        f.on(shard_listed{s, {}}, now);
    }
}

/// What a /workers listing asked for: the workers to requeue and those to read.
struct worker_change {
    std::vector<std::string> departed;
    std::vector<std::string> to_read;
};

/// The events about workers, one each; each returns what the step or the fsm says of it.
inline worker_change list_workers(
    master_fsm& f, std::vector<std::string> names, clock_type::time_point now
) {
    const auto step = f.on(master_saw::workers_listed{std::move(names)}, now);
    worker_change c;
    c.departed = requeued(step);
    for (const auto& r : of_kind(step, kind::read_workers)) {
        c.to_read.insert(c.to_read.end(), r.ids.begin(), r.ids.end());
    }
    return c;
}

/// A new worker's node read: true when the fsm follows the worker.
inline bool read_worker(
    master_fsm& f,
    const std::string& id,
    std::string data,
    bool ephemeral,
    clock_type::time_point now
) {
    const auto step = f.on(workers_read{{worker_node{id, std::move(data), ephemeral}}}, now);
    const auto follows = of_kind(step, kind::follow_worker);
    return follows.size() == 1 && follows[0].id == id;
}

/// A live worker's directory listed: the tasks finished since the last listing, or nullopt
/// once the worker has departed.
inline std::optional<std::uint64_t> list_dir(
    master_fsm& f,
    const master_stats& stats,
    const std::string& id,
    std::vector<std::string> names,
    clock_type::time_point now
) {
    const auto before = stats.finished;
    f.on(master_saw::dir_listed{id, std::move(names)}, now);
    if (!f.worker_alive(id)) {
        return std::nullopt;
    }
    return stats.finished - before;
}

// NOLINTNEXTLINE(readability-identifier-naming): gtest fixtures are CamelCase
struct MasterFsm : ::testing::Test {
    master_stats stats;
    clock_type::time_point t0 = clock_type::time_point{} + std::chrono::hours(1);
    std::vector<protocol::task_head> assigned_specs;
    master_fsm view{protocol::layout{}, 7, options(), stats};
    std::vector<std::string> live;

    master_fsm::options options() {
        master_fsm::options o;
        // A master that has named them already (its first read of the workers is behind it).
        o.master_node.features = protocol::own_features();
        o.policy = protocol::placement_policy::least_loaded;
        o.unknown_type_grace = milliseconds(10'000);
        o.unknown_cancel_grace = milliseconds(30'000);
        o.on_assigned = [this](const protocol::task_head& t) { assigned_specs.push_back(t); };
        return o;
    }

    MasterFsm() { list_all_shards(view, t0); }

    worker_change workers_listed(std::vector<std::string> names) {
        return list_workers(view, std::move(names), t0);
    }
    bool worker_read(const std::string& id, std::string data, bool ephemeral) {
        return read_worker(view, id, std::move(data), ephemeral, t0);
    }
    std::optional<std::uint64_t> dir_listed(const std::string& id, std::vector<std::string> names) {
        return list_dir(view, stats, id, std::move(names), t0);
    }
    /// A live worker's node changed: true while it is a worker of ours.
    bool worker_changed(const std::string& id, std::string data) {
        view.on(master_saw::worker_changed{id, std::move(data)}, t0);
        return view.worker_alive(id);
    }
    /// A live worker's directory is gone: true while the worker lives.
    bool dir_gone(const std::string& id) {
        view.on(master_saw::dir_gone{id}, t0);
        return view.worker_alive(id);
    }
    /// /assign listed while /workers lists `alive`: the departed workers to requeue.
    std::vector<std::string> assign_dirs_listed(
        std::vector<std::string> names, std::set<std::string> alive
    ) {
        return requeued(
            view.on(master_saw::assign_dirs_listed{std::move(names), std::move(alive)}, t0)
        );
    }

    void join(
        const std::string& id,
        int capacity,
        std::vector<std::string> types = {"echo"},
        std::optional<int> threads = std::nullopt
    ) {
        live.push_back(id);
        const auto change = workers_listed(live);
        ASSERT_EQ(change.to_read, std::vector<std::string>{id});
        ASSERT_TRUE(worker_read(id, worker_data(capacity, std::move(types), false, threads), true));
        ASSERT_TRUE(dir_listed(id, {}));
    }

    std::vector<std::string> leave(const std::string& id) {
        std::erase(live, id);
        return workers_listed(live).departed;
    }

    /// Lists `tids` in shard 0 and answers the load the fsm asks for with `data`.
    void submit(const std::vector<std::string>& tids, const std::string& data = task_data()) {
        view.on(shard_listed{0, tids}, t0);
        load(data);
    }

    /// Submits 4 tasks and decides: the workers they go to, in queue order.
    std::string decide_four() {
        submit({tid(5, 1), tid(5, 2), tid(5, 3), tid(5, 4)});
        std::string order;
        for (const auto& a : of_kind(view.on(decide{}, t0), kind::assign)) {
            order += a.worker + " ";
        }
        return order;
    }

    /// Answers the fsm's read of pending tasks, all with `data` (the only action due).
    void load(const std::string& data) {
        auto step = view.on(decide{}, t0);
        ASSERT_EQ(step.actions.size(), 1U);
        auto loads = of_kind(step, kind::read_tasks);
        ASSERT_EQ(loads.size(), 1U);
        std::vector<task_read> reads;
        for (const auto& t : loads[0].tids) {
            reads.push_back(task_read{t, task_read::status::ok, data, 0});
        }
        view.on(tasks_read{reads}, t0);
    }
};

}  // namespace zkd::roles::fsm_test
