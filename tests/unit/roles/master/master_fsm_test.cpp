// SPDX-License-Identifier: MIT
// The master's decisions without ZooKeeper (roles/master/master_fsm.hpp), through its one door:
// each call of on() is one event in, the step it returns the actions out; the answers to its
// transactions are fed back by hand. Time is a parameter: no test sleeps.
#include "roles/master/master_fsm.hpp"

#include "protocol/ids.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::master_saw;
using clock_type = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Task ids of §3: t<9 - priority>-<ms>-<client><counter>; they sort FIFO within priority.
std::string tid(int priority, int n) {
    return "t" + std::to_string(9 - priority) + "-1763733600123-3fa9c2d1" +
           std::string(6 - std::to_string(n).size(), '0') + std::to_string(n);
}

std::string worker_data(
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
    return protocol::encode(w);
}

std::string task_data(std::string type = "echo", int attempt = 1, int max_attempts = 3) {
    protocol::task_spec t;
    t.type = std::move(type);
    t.args = "x";
    t.attempt = attempt;
    t.max_attempts = max_attempts;
    t.submitted_ms = 1763733600123;
    return protocol::encode(t);
}

master_txn_report committed(std::size_t ops) {
    return {
        protocol::txn_answer{false, std::vector<protocol::op_code>(ops, protocol::op_code::ok)},
        false,
        {}};
}

/// A failure of op `at` of `ops` with `code`.
master_txn_report failed(
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
master_txn_report unknown() {
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
}  // namespace kind

/// The actions of one kind a step holds, in order.
template <class Action>
std::vector<Action> of_kind(const master_step& s, std::type_identity<Action> /*kind*/) {
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
std::vector<std::string> requeued(const master_step& s) {
    std::vector<std::string> out;
    for (const auto& a : of_kind(s, kind::list_departed)) {
        out.push_back(a.worker);
    }
    return out;
}

/// Lists every pending shard empty: until each was listed once, the fsm decides nothing.
void list_all_shards(master_fsm& f, clock_type::time_point now) {
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
worker_change list_workers(
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
bool read_worker(
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
std::optional<std::uint64_t> list_dir(
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
    std::vector<protocol::task_spec> assigned_specs;
    master_fsm view{
        protocol::layout{}, 7,
        master_fsm::options{
            protocol::placement_policy::least_loaded, milliseconds(10'000), milliseconds(30'000),
            [this](const protocol::task_spec& t) { assigned_specs.push_back(t); }},
        stats};
    std::vector<std::string> live;

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

}  // namespace

TEST_F(MasterFsm, AssignsToFreeSlotsFifoWithinPriorityAndFencedByTheWorkerCheck) {
    join("w1", 2);
    const auto low = tid(3, 1);
    const auto first = tid(5, 2);
    const auto second = tid(5, 3);
    const auto high = tid(8, 4);
    submit({low, second, first, high});
    auto step = view.on(decide{}, t0);
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 2U);  // two slots
    EXPECT_EQ(assigns[0].tid, high);
    EXPECT_EQ(assigns[1].tid, first);
    EXPECT_EQ(assigns[0].worker, "w1");
    EXPECT_EQ(
        assigns[0].ops, protocol::assign_ops(
                            0, high, "w1", *protocol::decode_task(task_data()), 7,
                            protocol::decode_task(assigns[0].ops[2].data)->assigned_ms
                        )
    );
    // Full until an answer or the worker's directory says otherwise.
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());
    view.on(answered{assigns[0], committed(3)}, t0);
    view.on(answered{assigns[1], committed(3)}, t0);
    EXPECT_EQ(stats.assigned, 2U);
    EXPECT_EQ(assigned_specs.size(), 2U);
    EXPECT_EQ(view.queue_depth(), 2U);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());
    // The worker finished one: its slot goes to the next in line.
    EXPECT_EQ(dir_listed("w1", {first}), 1U);
    EXPECT_EQ(stats.finished, 1U);
    const auto next = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(next.size(), 1U);
    EXPECT_EQ(next[0].tid, second);
}

TEST_F(MasterFsm, TheTasksOfOneDecisionStayTogetherOnAWorkerUpToItsThreads) {
    // Two idle workers of 2 threads: 4 tasks decided at once (one transaction) go two and
    // two, so each worker reads one log for its pair and runs them side by side.
    join("w1", 8, {"echo"}, 2);
    join("w2", 8, {"echo"}, 2);
    EXPECT_EQ(decide_four(), "w1 w1 w2 w2 ");
}

TEST_F(MasterFsm, WorkersThatDoNotSayTheirThreadsGetADecisionsTasksInTurn) {
    join("w1", 8);
    join("w2", 8);
    EXPECT_EQ(decide_four(), "w1 w2 w1 w2 ");
}

TEST_F(MasterFsm, AWorkerDirectoryIsListedAgainOnlyWhenATaskWaits) {
    join("w1", 2);
    join("w2", 2);
    // Nothing waits: a change of the directory (our own assignment, a T4, a task placed
    // there directly) can wait.
    EXPECT_FALSE(view.worker_dir_listing_wanted("w1"));
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    submit({a, b});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);  // least loaded: one each
    for (const auto& x : assigns) {
        view.on(answered{x, committed(3)}, t0);
    }
    EXPECT_FALSE(view.worker_dir_listing_wanted("w1"));  // 1 of 2 by the count
    const auto c = tid(5, 3);
    const auto d = tid(5, 4);
    submit({c, d});
    assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    // Nothing waits: no need yet.
    EXPECT_FALSE(view.worker_dir_listing_wanted("w1"));
    // A task waits: both directories are wanted, also while the assignments are still out.
    const auto e = tid(5, 5);
    submit({e});
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    EXPECT_TRUE(view.worker_dir_listing_wanted("w2"));
    for (const auto& x : assigns) {
        view.on(answered{x, committed(3)}, t0);
    }
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    // The listing shows w1's tasks finished: room again, and the waiting task goes there.
    ASSERT_TRUE(dir_listed("w1", {}));
    const auto next = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(next.size(), 1U);
    EXPECT_EQ(next[0].worker, "w1");
    EXPECT_EQ(next[0].tid, e);
    view.on(answered{next[0], committed(3)}, t0);
    // The one still full: not wanted once the waiting task is on its way elsewhere.
    EXPECT_FALSE(view.worker_dir_listing_wanted("w2"));
    // An assignment that found the directory gone wants it listed (is it back?), and a
    // listing that finds it clears that.
    const auto f = tid(5, 6);
    submit({f});
    auto to_w1 = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(to_w1.size(), 1U);
    view.on(answered{to_w1[0], failed(3, 2, protocol::op_code::no_node)}, t0);
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    ASSERT_TRUE(dir_listed("w1", {e}));
    // f waits still (its next try after a pause): a change there would want a listing.
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    // An open cancel request wants every directory (it goes to the task's holder).
    view.on(cancels_listed{{tid(5, 9)}}, t0);
    EXPECT_TRUE(view.worker_dir_listing_wanted("w2"));
    // A departed worker: listing (and finding it gone) ends its follower.
    std::erase(live, "w2");
    (void)workers_listed(live);
    view.on(cancels_listed{{}}, t0);
    EXPECT_TRUE(view.worker_dir_listing_wanted("w2"));
}

// A directory whose watch fired may hold tasks clients placed there directly (docs/protocol.md
// §6 T1 "Direct placement"): its worker gets nothing until it is listed, and then only the room
// the listing leaves.
TEST_F(MasterFsm, AWorkerWhoseDirectoryChangedGetsNothingUntilItIsListed) {
    join("w1", 3);
    ASSERT_TRUE(dir_listed("w1", {}));
    view.on(dir_touched{"w1"}, t0);
    EXPECT_FALSE(view.worker_dir_listing_wanted("w1"));  // nothing waits
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    submit({a, b});
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    // Two tasks a client placed there: room for one more.
    ASSERT_TRUE(dir_listed("w1", {tid(4, 7), tid(4, 8)}));
    const auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, a);
    view.on(answered{assigns[0], committed(3)}, t0);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());  // b waits: full
}

// A worker just read (joined, or found at takeover) may hold tasks already: a dead master's,
// or ones clients placed there directly. It gets nothing until its directory is listed.
TEST_F(MasterFsm, AWorkerGetsNothingBeforeItsDirectoryIsFirstListed) {
    live.push_back("w1");
    ASSERT_EQ(workers_listed(live).to_read, std::vector<std::string>{"w1"});
    ASSERT_TRUE(worker_read("w1", worker_data(2, {"echo"}), true));
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    submit({a, b});
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());
    // The listing finds one task there (placed by a client): room for one more.
    ASSERT_TRUE(dir_listed("w1", {tid(4, 7)}));
    const auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, a);
}

// The count of assignments on their way, which decides whether a full worker's directory is
// wanted, stays right when a worker departs with one of them out: the task it was for waits
// again, and the other full worker's directory is wanted for it.
TEST_F(MasterFsm, AnAssignmentOutToADepartedWorkerNoLongerCountsAsOnItsWay) {
    join("w1", 1);
    join("w2", 1);
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    submit({a, b});
    const auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    const auto to_w2 = assigns[0].worker == "w2" ? assigns[0] : assigns[1];
    const auto to_w1 = assigns[0].worker == "w1" ? assigns[0] : assigns[1];
    // w2 leaves while its assignment is out; its requeue finds nothing of ours there.
    std::erase(live, "w2");
    const auto change = workers_listed(live);
    ASSERT_EQ(change.departed, std::vector<std::string>{"w2"});
    view.on(departed_listed{"w2", std::nullopt}, t0);                        // T6 over
    view.on(answered{to_w2, failed(3, 0, protocol::op_code::no_node)}, t0);  // check /workers/w2
    view.on(answered{to_w1, committed(3)}, t0);
    // w1 is full by the count, and the task meant for w2 waits with nothing on its way.
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    ASSERT_TRUE(dir_listed("w1", {}));
    const auto next = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(next.size(), 1U);
    EXPECT_EQ(next[0].worker, "w1");
    EXPECT_EQ(next[0].tid, to_w2.tid);
}

TEST_F(MasterFsm, OnlyWorkersServingTheTypeGetItAndDrainingOnesNone) {
    join("w1", 4, {"other"});
    join("w2", 4, {"echo"});
    submit({tid(5, 1)});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].worker, "w2");
    view.on(answered{assigns[0], committed(3)}, t0);

    ASSERT_TRUE(worker_changed("w2", worker_data(4, {"echo"}, true)));
    submit({tid(5, 2)});
    const auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    // Only a draining worker serves the type now: that counts as none, after the grace.
    EXPECT_TRUE(of_kind(step, kind::reject).empty());
    ASSERT_TRUE(step.wake_at);
    EXPECT_EQ(of_kind(view.on(decide{}, *step.wake_at), kind::reject).size(), 1U);
}

TEST_F(MasterFsm, AMalformedTaskAndANameThatIsNoTaskIdEndInFailedResults) {
    join("w1", 2);
    submit({tid(5, 1)}, "{ this is not json");
    view.on(shard_listed{0, {tid(5, 1), "garbage"}}, t0);
    auto rejects = of_kind(view.on(decide{}, t0), kind::reject);
    ASSERT_EQ(rejects.size(), 2U);
    for (const auto& r : rejects) {
        EXPECT_EQ(r.code, protocol::codes::malformed_task);
        ASSERT_EQ(r.ops.size(), 2U);
        EXPECT_EQ(r.ops[0], protocol::txn_op::remove(view.pending_path(r.tid)));
    }
    view.on(answered{rejects[0], committed(2)}, t0);
    view.on(
        answered{rejects[1], failed(2, 0, protocol::op_code::no_node)}, t0
    );  // gone: forgotten too
    EXPECT_EQ(stats.rejected, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
    EXPECT_TRUE(view.on(decide{}, t0).actions.empty());
}

TEST_F(MasterFsm, MalformedResultsCarryTheAttemptTheTaskIsOn) {
    join("w1", 2);
    submit({tid(5, 1)}, "{ this is not json");
    auto rejects = of_kind(view.on(decide{}, t0), kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    ASSERT_EQ(rejects[0].ops.size(), 2U);
    const auto r = protocol::decode_result(rejects[0].ops[1].data);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->attempt, 1);  // unreadable: the first try (§4's default), not absent (§5)
    EXPECT_EQ(r->error->code, protocol::codes::malformed_task);
}

TEST_F(MasterFsm, ABundleWhoseArrayDoesNotMatchItsIdFailsBeforeItIsAssigned) {
    join("w1", 2);
    const auto bundle = protocol::bundle_id(tid(5, 1), 3);
    protocol::task_spec two;
    two.type = "echo";
    two.bundle = {boost::json::value(1), boost::json::value(2)};
    const auto plain = tid(5, 2);
    protocol::task_spec with_array = two;  // a plain id says: no bundle
    view.on(shard_listed{0, {bundle, plain}}, t0);
    auto loads = of_kind(view.on(decide{}, t0), kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    std::vector<task_read> reads;
    for (const auto& t : loads[0].tids) {
        reads.push_back(task_read{
            t, task_read::status::ok, protocol::encode(t == bundle ? two : with_array), 0});
    }
    view.on(tasks_read{reads}, t0);
    const auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    const auto rejects = of_kind(step, kind::reject);
    ASSERT_EQ(rejects.size(), 2U);
    for (const auto& r : rejects) {
        EXPECT_EQ(r.code, protocol::codes::malformed_task);
        EXPECT_NE(r.why.find("where its id says"), std::string::npos) << r.why;
    }
}

TEST_F(MasterFsm, ATypeNobodyServesFailsOnlyAfterItsGrace) {
    join("w1", 2);
    submit({tid(5, 1)}, task_data("nobody"));
    auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::reject).empty());
    ASSERT_TRUE(step.wake_at);
    EXPECT_EQ(*step.wake_at, t0 + milliseconds(10'000));
    EXPECT_TRUE(of_kind(view.on(decide{}, t0 + milliseconds(9'999)), kind::reject).empty());
    auto rejects = of_kind(view.on(decide{}, t0 + milliseconds(10'000)), kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].code, protocol::codes::unknown_type);
}

TEST_F(MasterFsm, NoWorkersAtAllIsNoReasonToRejectOrEvenRead) {
    view.on(shard_listed{0, {tid(5, 1)}}, t0);
    const auto step = view.on(decide{}, t0 + std::chrono::hours(1));
    EXPECT_TRUE(step.actions.empty());
    EXPECT_EQ(view.queue_depth(), 1U);
}

TEST_F(MasterFsm, AFailingAssignmentBacksOffAndEndsFailedAfterMaxTries) {
    join("w1", 1);
    const auto t = tid(5, 1);
    submit({t});
    auto now = t0;
    milliseconds expected_wait(200);
    master_step last;
    for (int i = 1; i <= master_fsm::max_assign_failures; ++i) {
        auto assigns = of_kind(view.on(decide{}, now), kind::assign);
        ASSERT_EQ(assigns.size(), 1U) << "try " << i;
        last = view.on(answered{assigns[0], failed(3, 1, protocol::op_code::other)}, now);
        if (i == master_fsm::max_assign_failures) {
            break;
        }
        EXPECT_TRUE(last.actions.empty());
        const auto step = view.on(decide{}, now);
        EXPECT_TRUE(of_kind(step, kind::assign).empty()) << "no retry before its time";
        ASSERT_TRUE(step.wake_at);
        EXPECT_EQ(*step.wake_at, now + expected_wait);
        now += expected_wait;
        expected_wait *= 2;
    }
    // The answer to the last try decides it: a failed result.
    auto rejects = of_kind(last, kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].code, protocol::codes::malformed_task);
    EXPECT_NE(rejects[0].why.find("cannot be assigned"), std::string::npos);
    EXPECT_TRUE(of_kind(view.on(decide{}, now), kind::reject).empty());  // once
}

TEST_F(MasterFsm, LostAnswersAreRetriedForeverNeverFailingTheTask) {
    join("w1", 1);
    submit({tid(5, 1)});
    auto now = t0;
    for (int i = 0; i < 10; ++i) {
        const auto step = view.on(decide{}, now);
        EXPECT_TRUE(of_kind(step, kind::reject).empty());
        auto assigns = of_kind(step, kind::assign);
        ASSERT_EQ(assigns.size(), 1U) << "try " << i;
        view.on(answered{assigns[0], unknown()}, now);
        now += milliseconds(5'000);  // the longest wait
    }
    EXPECT_TRUE(of_kind(view.on(decide{}, now), kind::reject).empty());
}

TEST_F(MasterFsm, AnAnswerSayingTheTaskIsGoneOrTheWorkerLeftIsNoTrouble) {
    join("w1", 2);
    submit({tid(5, 1), tid(5, 2)});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    view.on(
        answered{assigns[0], failed(3, 1, protocol::op_code::no_node)}, t0
    );  // cancelled meanwhile
    view.on(
        answered{assigns[1], failed(3, 0, protocol::op_code::no_node)}, t0
    );  // worker check failed
    EXPECT_EQ(view.queue_depth(), 1U);
    const auto again = of_kind(view.on(decide{}, t0), kind::assign);  // at once, no backoff
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].tid, tid(5, 2));
}

TEST_F(MasterFsm, ADeletedWorkerDirectoryStopsAssignmentsThereUntilItIsBack) {
    join("w1", 2);
    submit({tid(5, 1)});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    view.on(answered{assigns[0], failed(3, 2, protocol::op_code::no_node)}, t0);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());
    view.on(dir_back{"w1"}, t0);
    EXPECT_EQ(of_kind(view.on(decide{}, t0), kind::assign).size(), 1U);
}

TEST_F(MasterFsm, ADeposedMasterNotesNoTroubleForItsFailures) {
    join("w1", 1);
    submit({tid(5, 1)});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    stats.deposed = true;
    view.on(answered{assigns[0], failed(3, 1, protocol::op_code::other)}, t0);
    const auto step = view.on(decide{}, t0);
    EXPECT_FALSE(step.wake_at);
    EXPECT_EQ(of_kind(step, kind::assign).size(), 1U);
}

TEST_F(MasterFsm, CancelOfAPendingTaskFailsItCancelled) {
    join("w1", 1, {"other"});
    const auto t = tid(5, 1);
    view.on(shard_listed{0, {t}}, t0);
    view.on(cancels_listed{{t}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops[0], protocol::txn_op::remove(view.pending_path(t)));
    EXPECT_EQ(cancels[0].ops[2], protocol::txn_op::remove(protocol::layout::cancel_request(t)));
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());  // one at a time
    view.on(answered{cancels[0], committed(3)}, t0);
    EXPECT_EQ(stats.cancelled, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, CancelOfAnAssignedTaskLeavesAMarkerForItsWorker) {
    join("w1", 1);
    const auto t = tid(5, 1);
    ASSERT_TRUE(dir_listed("w1", {t}));
    view.on(cancels_listed{{t}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::cancel_assigned_ops("w1", t));
}

TEST_F(MasterFsm, ACancelArrivingWhileT2IsInFlightWaitsAndTheWorkerDyingMakesItAPendingCancel) {
    join("w1", 1);
    const auto t = tid(5, 1);
    submit({t});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    view.on(cancels_listed{{t}}, t0);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty()) << "decided when T2 lands";
    EXPECT_EQ(leave("w1"), std::vector<std::string>{"w1"});
    // T2 failed on the worker's check: the task is still pending here, and cancelled so.
    view.on(answered{assigns[0], failed(3, 0, protocol::op_code::no_node)}, t0);
    auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    auto cancels = of_kind(step, kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops[0], protocol::txn_op::remove(view.pending_path(t)));
    view.on(answered{cancels[0], committed(3)}, t0);
    EXPECT_EQ(view.queue_depth(), 0U);
    view.on(departed_listed{"w1", std::nullopt}, t0);  // T6 over
    EXPECT_FALSE(view.worker_alive("w1"));
}

TEST_F(MasterFsm, ACancelWhoseMarkerFindsTheAssignmentGoneFollowsTheTaskBackToPending) {
    join("w1", 1);
    const auto t = tid(5, 1);
    submit({t});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    view.on(cancels_listed{{t}}, t0);
    view.on(answered{assigns[0], committed(3)}, t0);
    // The task sits in w1's directory: a marker goes there.
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::cancel_assigned_ops("w1", t));
    // The worker dies and T6 moves the task back to pending before the marker lands: the
    // marker's check of the assignment fails.
    EXPECT_EQ(leave("w1"), std::vector<std::string>{"w1"});
    view.on(answered{cancels[0], failed(3, 0, protocol::op_code::no_node)}, t0);
    EXPECT_EQ(stats.cancelled, 0U);
    view.on(shard_listed{0, {t}}, t0);
    // The request still stands: the task is cancelled where it is now, not left to run again
    // with its request dropped.
    auto again = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].ops[0], protocol::txn_op::remove(view.pending_path(t)));
    view.on(answered{again[0], committed(3)}, t0);
    EXPECT_EQ(stats.cancelled, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ACancelWhoseMarkerFindsTheTaskFinishedIsDroppedAfterTheUsualWait) {
    join("w1", 1);
    const auto t = tid(5, 1);
    ASSERT_TRUE(dir_listed("w1", {t}));
    view.on(cancels_listed{{t}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    view.on(
        answered{cancels[0], failed(3, 0, protocol::op_code::no_node)}, t0
    );  // finished meanwhile
    // Not sent again as a marker (its directory listing is not in yet), and only dropped
    // once unknown for the usual 30 s.
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());
    auto drop = of_kind(view.on(decide{}, t0 + milliseconds(30'000)), kind::cancel);
    ASSERT_EQ(drop.size(), 1U);
    EXPECT_EQ(drop[0].ops, protocol::drop_cancel_ops(t));
}

TEST_F(MasterFsm, APendingTaskThatVanishedUnderACancelIsForgottenNotCancelledInALoop) {
    join("w1", 1, {"other"});
    const auto t = tid(5, 1);
    view.on(shard_listed{0, {t}}, t0);
    view.on(cancels_listed{{t}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    // Its shard's listing came while the cancel was out (and kept it, being in flight).
    view.on(shard_listed{0, {}}, t0);
    view.on(answered{cancels[0], failed(3, 0, protocol::op_code::no_node)}, t0);
    EXPECT_EQ(view.queue_depth(), 0U);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());
}

TEST_F(MasterFsm, ACancelForATaskUnknownHereIsDroppedOnlyAfterThirtySeconds) {
    join("w1", 1);
    const auto t = tid(5, 1);
    view.on(cancels_listed{{t}}, t0);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());
    EXPECT_TRUE(of_kind(view.on(decide{}, t0 + milliseconds(29'999)), kind::cancel).empty());
    auto cancels = of_kind(view.on(decide{}, t0 + milliseconds(30'000)), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::drop_cancel_ops(t));
}

TEST_F(MasterFsm, ForeignChildrenAreClearedBeforeTheTaskIsCancelled) {
    join("w1", 1, {"other"});
    const auto t = tid(5, 1);
    view.on(shard_listed{0, {t}}, t0);
    view.on(cancels_listed{{t}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    // The answer says someone wrote below the node: cleared first, and not cancelled again
    // meanwhile.
    const auto clears = of_kind(
        view.on(answered{cancels[0], failed(3, 0, protocol::op_code::not_empty)}, t0),
        kind::clear_below
    );
    ASSERT_EQ(clears.size(), 1U);
    EXPECT_EQ(clears[0].path, view.pending_path(t));
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());
    // Once at a time: found again while it is being cleared, it is not cleared twice.
    EXPECT_TRUE(of_kind(view.on(foreign_found{clears[0].path}, t0), kind::clear_below).empty());
    view.on(cleared{clears[0].path}, t0);
    EXPECT_EQ(of_kind(view.on(decide{}, t0), kind::cancel).size(), 1U);
}

TEST_F(MasterFsm, AWorkerLeavingWithTasksIsHandedToT6AndForgottenAfter) {
    join("w1", 3);
    join("w2", 3);
    ASSERT_TRUE(dir_listed("w1", {tid(5, 1), tid(5, 2)}));
    EXPECT_EQ(leave("w1"), std::vector<std::string>{"w1"});
    EXPECT_TRUE(leave("w9").empty());
    EXPECT_FALSE(dir_listed("w1", {}));  // T6 owns the directory now
    EXPECT_FALSE(worker_changed("w1", worker_data(3, {"echo"})));
    EXPECT_FALSE(dir_gone("w1"));
    // Its tasks come back pending (T6) and go to the live worker.
    submit({tid(5, 1), tid(5, 2)});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    EXPECT_EQ(assigns[0].worker, "w2");
    view.on(departed_listed{"w1", std::nullopt}, t0);  // T6 over
    // A directory without a worker (a dead master's leftover) is handed to T6 once.
    EXPECT_EQ(
        assign_dirs_listed({"w1", "w2", "w3"}, {"w2"}), (std::vector<std::string>{"w1", "w3"})
    );
    EXPECT_TRUE(assign_dirs_listed({"w1", "w3"}, {"w2"}).empty());
}

TEST_F(MasterFsm, WorkerNodesThatAreNotAWorkersSessionAreIgnored) {
    live = {"p1", "g1"};
    const auto change = workers_listed(live);
    EXPECT_EQ(change.to_read.size(), 2U);
    EXPECT_FALSE(worker_read("p1", worker_data(4, {"echo"}), false));  // persistent
    EXPECT_FALSE(worker_read("g1", "garbage", true));
    EXPECT_TRUE(workers_listed(live).to_read.empty());  // not read again
    view.on(shard_listed{0, {tid(5, 1)}}, t0);
    EXPECT_TRUE(view.on(decide{}, t0).actions.empty());
}

TEST_F(MasterFsm, AFinishedBundleCountsItsTasks) {
    join("w1", 2);
    const auto bundle = protocol::bundle_id(tid(5, 1), 3);
    ASSERT_TRUE(dir_listed("w1", {bundle, bundle + std::string(protocol::cancel_marker_suffix)}));
    EXPECT_EQ(dir_listed("w1", {}), 3U);
}

TEST_F(MasterFsm, APendingNodeThatVanishesBeforeItIsReadIsForgotten) {
    join("w1", 1);
    view.on(shard_listed{0, {tid(5, 1)}}, t0);
    auto loads = of_kind(view.on(decide{}, t0), kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::read_tasks).empty());  // one batch at a time
    view.on(tasks_read{{task_read{tid(5, 1), task_read::status::error, {}, 0}}}, t0);
    // Not read again in a tight loop (a lost connection): after a moment.
    const auto paused = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(paused, kind::read_tasks).empty());
    ASSERT_TRUE(paused.wake_at);
    EXPECT_EQ(*paused.wake_at, t0 + milliseconds(100));
    loads = of_kind(view.on(decide{}, t0 + milliseconds(100)), kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U) << "read again after an error";
    view.on(tasks_read{{task_read{tid(5, 1), task_read::status::gone, {}, 0}}}, t0);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ListingsAreDiffedPerShardAndTheQueueKeepsIdOrderWithBundlesAndGarbage) {
    // The fsm keeps ids in a compact form (roles/master/task_key.hpp): its order is still the ids'
    // string order, bundles ("_10" before "_9") and names that are no task id included.
    join("w1", 1);
    const auto a = tid(5, 1);
    const auto a10 = protocol::bundle_id(a, 10);
    const auto a9 = protocol::bundle_id(a, 9);
    const auto b = tid(5, 2);
    const auto c = tid(9, 3);
    view.on(shard_listed{0, {b, a9, "not-a-task", a, a10}}, t0);
    view.on(shard_listed{1, {c, b}}, t0);  // b is pending in shard 0 already: it stays there
    EXPECT_EQ(view.queue_depth(), 6U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(0) + "/" + b);
    EXPECT_EQ(view.pending_path(c), protocol::layout::pending_shard(1) + "/" + c);
    auto step = view.on(decide{}, t0);
    const auto rejects = of_kind(step, kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].tid, "not-a-task");
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, (std::vector<std::string>{c, a, a10, a9, b}));
    std::vector<task_read> reads;
    for (const auto& t : loads[0].tids) {
        reads.push_back(task_read{t, task_read::status::ok, task_data(), 0});
    }
    view.on(tasks_read{reads}, t0);
    step = view.on(decide{}, t0);
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, c);  // the highest priority first, from whichever shard
    // c's node is gone while its assignment is out: kept until the answer says so.
    view.on(shard_listed{1, {}}, t0);
    EXPECT_EQ(view.queue_depth(), 6U);
    // a is gone from shard 0 without us: forgotten; the others stay.
    view.on(shard_listed{0, {b, "not-a-task", a9, a10}}, t0);
    EXPECT_EQ(view.queue_depth(), 5U);
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    EXPECT_EQ(view.queue_depth(), 4U);
    // b came back in shard 1 after shard 0 lost it: a new task there.
    view.on(shard_listed{0, {"not-a-task", a9, a10}}, t0);
    EXPECT_EQ(view.queue_depth(), 3U);
    view.on(shard_listed{1, {b}}, t0);
    EXPECT_EQ(view.queue_depth(), 4U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(1) + "/" + b);
}

// --- pending shards followed by their change logs (§6, §7) ----------------------------------

namespace {

protocol::log_entry logged(std::string name, std::optional<std::string> data = task_data()) {
    return protocol::log_entry{std::move(name), std::move(data)};
}

}  // namespace

TEST_F(MasterFsm, ALoggedTaskWithItsDataIsAssignedWithoutARead) {
    join("w1", 2);
    view.on(shard_logged{0, {logged(tid(5, 1))}}, t0);
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    const auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::read_tasks).empty());
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, tid(5, 1));
    EXPECT_EQ(assigns[0].worker, "w1");
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    EXPECT_EQ(stats.assigned, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ALoggedTaskWithoutDataOrBeyondTheLoadWindowIsReadWhenItsTurnComes) {
    join("w1", 1);  // a window of 32 + 1 tasks
    std::vector<protocol::log_entry> entries;
    for (int i = 1; i <= 40; ++i) {
        entries.push_back(logged(tid(5, i)));
    }
    view.on(shard_logged{0, std::move(entries)}, t0);
    EXPECT_EQ(view.queue_depth(), 40U);
    EXPECT_EQ(stats.tasks_from_logs, 33U);  // the others' data is kept aside
    EXPECT_GT(view.logged_data_bytes(), 7 * task_data().size());
    auto step = view.on(decide{}, t0);
    ASSERT_EQ(of_kind(step, kind::assign).size(), 1U);
    EXPECT_EQ(of_kind(step, kind::assign)[0].tid, tid(5, 1));
    EXPECT_TRUE(of_kind(step, kind::read_tasks).empty());  // 32 loaded wait for the slot
    // A name that came without its data (the transaction's budget ran out) is read.
    view.on(answered{of_kind(step, kind::assign)[0], committed(3)}, t0);
    view.on(shard_listed{0, {}}, t0);  // everything taken or gone
    view.on(shard_logged{0, {logged(tid(5, 50), std::nullopt)}}, t0);
    EXPECT_EQ(stats.tasks_from_logs, 33U);
    step = view.on(decide{}, t0);
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{tid(5, 50)});
}

TEST_F(MasterFsm, WithoutWorkersALoggedTasksDataIsKeptAsideAndTakenWhenItMayBePlaced) {
    view.on(shard_logged{0, {logged(tid(5, 1))}}, t0);
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_EQ(stats.tasks_from_logs, 0U);
    EXPECT_GT(view.logged_data_bytes(), 0U);
    EXPECT_TRUE(view.on(decide{}, t0).actions.empty());
    join("w1", 1);
    const auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::read_tasks).empty());  // no read: the log had it
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, tid(5, 1));
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    EXPECT_EQ(view.logged_data_bytes(), 0U);
}

TEST(MasterFsmBudget, PastItsBudgetALoggedTasksDataIsNotKeptAndTheTaskIsRead) {
    master_stats stats;
    master_fsm::options opts;
    opts.logged_data_budget = task_data().size() + 150;  // one task, with its overhead
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    list_all_shards(view, t0);
    view.on(shard_logged{0, {logged(tid(5, 1)), logged(tid(5, 2))}}, t0);
    EXPECT_EQ(view.queue_depth(), 2U);
    EXPECT_GT(view.logged_data_bytes(), 0U);
    EXPECT_LE(view.logged_data_bytes(), opts.logged_data_budget);
    ASSERT_TRUE(list_workers(view, {"w1"}, t0).to_read == std::vector<std::string>{"w1"});
    ASSERT_TRUE(read_worker(view, "w1", worker_data(2, {"echo"}), true, t0));
    ASSERT_TRUE(list_dir(view, stats, "w1", {}, t0));
    const auto step = view.on(decide{}, t0);
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{tid(5, 2)});  // the one not kept
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, tid(5, 1));
}

TEST_F(MasterFsm, ALogReadAfterAMissedVersionGivesItsDataToTheTasksTheListingFound) {
    join("w1", 4);
    const auto a = tid(5, 1);  // created by a transaction whose log was missed
    const auto b = tid(5, 2);  // created by the one whose log was read
    const auto gone = tid(5, 3);
    view.on(shard_listed{0, {a, b}}, t0);
    view.on(shard_logged{0, {logged(b), logged(gone), logged(tid(5, 4), std::nullopt)}, true}, t0);
    EXPECT_EQ(view.queue_depth(), 2U);  // a name the listing lacks is gone, not new
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    const auto step = view.on(decide{}, t0);
    const auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{a});  // only the missed one is read
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, b);
    // Once read (or placed), a task's data is not taken from a later log again.
    view.on(shard_logged{0, {logged(a, task_data("echo", 2))}, true}, t0);
    EXPECT_EQ(stats.tasks_from_logs, 1U);
}

TEST_F(MasterFsm, ALoggedTaskDoesNotTakeTheLastSlotFromAListedOneAheadOfItBeingRead) {
    // One T1 in two shards landed while the new master listed them: the first task came by
    // a listing (its data to read), the second by its shard's log, with its data. Both are
    // known when the view decides; the one slot is the first one's (§3), not the second's
    // for as long as it runs.
    join("w1", 1);
    const auto first = tid(5, 1);
    const auto second = tid(5, 2);
    view.on(shard_listed{1, {first}}, t0);
    view.on(shard_logged{0, {logged(second)}}, t0);
    auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{first});
    // Still being read: the slot stays free for it.
    EXPECT_TRUE(view.on(decide{}, t0).actions.empty());
    view.on(tasks_read{{task_read{first, task_read::status::ok, task_data(), 0}}}, t0);
    step = view.on(decide{}, t0);
    auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, first);
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    // With more free slots than unread tasks ahead of it, a task with its data goes at once:
    // the slot it takes is nobody's.
    join("w2", 3);
    const auto third = tid(5, 3);
    const auto fourth = tid(5, 4);
    view.on(shard_listed{1, {third}}, t0);
    view.on(shard_logged{0, {logged(second), logged(fourth)}}, t0);
    step = view.on(decide{}, t0);
    loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{third});
    assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    EXPECT_EQ(assigns[0].tid, second);
    EXPECT_EQ(assigns[1].tid, fourth);
}

TEST_F(MasterFsm, LoggedNamesJoinTheShardsListingsDiffAndKnownOnesAreNotAddedAgain) {
    join("w1", 1);
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    const auto c = tid(5, 3);
    view.on(shard_listed{1, {b}}, t0);
    view.on(shard_logged{0, {logged(a), logged(b), logged(c), logged("not-a-task", "{}")}}, t0);
    EXPECT_EQ(view.queue_depth(), 4U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(1) + "/" + b);  // seen first
    auto step = view.on(decide{}, t0);
    const auto rejects = of_kind(step, kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].tid, "not-a-task");
    view.on(answered{rejects[0], committed(rejects[0].ops.size())}, t0);
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, a);
    EXPECT_EQ(view.queue_depth(), 3U);
    // Logged again (a listing raced the log): nothing changes, the assignment stays out.
    view.on(shard_logged{0, {logged(a)}}, t0);
    EXPECT_EQ(view.queue_depth(), 3U);
    // A listing of shard 0 that lacks a logged name forgets it, as it would a listed one.
    view.on(shard_listed{0, {a}}, t0);
    EXPECT_EQ(view.queue_depth(), 2U);  // a (in flight) and b (shard 1)
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    EXPECT_EQ(view.queue_depth(), 1U);
}

TEST_F(MasterFsm, ALoggedTaskWhoseDataIsGarbageEndsInAFailedResult) {
    join("w1", 1);
    view.on(shard_logged{0, {logged(tid(5, 1), "not json")}}, t0);
    const auto rejects = of_kind(view.on(decide{}, t0), kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].code, protocol::codes::malformed_task);
}

TEST_F(MasterFsm, ASuspectGetsAFreshTaskAsItsProbeAndNothingElse) {
    join("w1", 8);
    join("w2", 2);
    // w1 left an assignment unstarted past the bound (the shell read it so): suspect.
    auto& stalls = view.stalls();
    stalls.listed("w1", {"old"});
    stalls.listed("w1", {"old"});
    stall_watch::assignment unstarted;
    unstarted.tid = "old";
    unstarted.age_ms = 10'000;
    ASSERT_TRUE(stalls.read("w1", {unstarted}).now_suspect);
    // A task taken back once (attempt 2) is no probe: it goes to w2 although w1 is emptier.
    submit({tid(5, 1)}, task_data("echo", 2));
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].worker, "w2");
    view.on(answered{assigns[0], committed(3)}, t0);
    // Fresh tasks: one goes to w1 as its probe, the rest to w2 while it has room.
    submit({tid(5, 2), tid(5, 3), tid(5, 4)});
    assigns = of_kind(view.on(decide{}, t0), kind::assign);
    std::string order;
    for (const auto& a : assigns) {
        order += a.worker + " ";
    }
    EXPECT_EQ(order, "w1 w2 ");
    EXPECT_FALSE(stalls.may_assign("w1", t0)) << "its probe is out";
}

TEST(ResultSweep, SuccessiveSweepsCoverEveryDirectoryAFewAtATime) {
    const std::vector<std::string> dirs{
        "/results/00", "/results/01", "/results/a", "/results/b", "/results/c"};
    auto s = sweep_window(dirs, "", 2);
    EXPECT_EQ(s.dirs, (std::vector<std::string>{"/results/00", "/results/01"}));
    EXPECT_EQ(s.next_after, "/results/01");
    s = sweep_window(dirs, s.next_after, 2);
    EXPECT_EQ(s.dirs, (std::vector<std::string>{"/results/a", "/results/b"}));
    s = sweep_window(dirs, s.next_after, 2);
    EXPECT_EQ(s.dirs, std::vector<std::string>{"/results/c"});
    EXPECT_EQ(s.next_after, "") << "the end was reached: the next sweep starts again";
    // A directory the last sweep ended on may be gone: the next one goes on after its name.
    s = sweep_window({"/results/00", "/results/c"}, "/results/b", 2);
    EXPECT_EQ(s.dirs, std::vector<std::string>{"/results/c"});
    // Past the last one: from the start.
    s = sweep_window(dirs, "/results/z", 10);
    EXPECT_EQ(s.dirs, dirs);
    EXPECT_EQ(s.next_after, "");
    EXPECT_TRUE(sweep_window({}, "", 10).dirs.empty());
}

// The queue is ordered across shards (§3): a new master decides nothing before each pending
// shard was listed once (or is gone).
TEST(MasterFsmShards, NothingIsDecidedBeforeEveryPendingShardIsListedOnce) {
    master_stats stats;
    master_fsm view(protocol::layout{}, 7, {}, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    ASSERT_EQ(list_workers(view, {"w1"}, t0).to_read, std::vector<std::string>{"w1"});
    ASSERT_TRUE(read_worker(view, "w1", worker_data(1, {"echo"}), true, t0));
    ASSERT_TRUE(list_dir(view, stats, "w1", {}, t0));
    view.on(shard_listed{0, {tid(5, 1)}}, t0);
    const auto last = protocol::layout{}.pending_shards - 1;
    for (std::uint32_t s = 1; s < last; ++s) {
        view.on(shard_listed{s, {}}, t0);
    }
    const auto early = view.on(decide{}, t0);
    EXPECT_FALSE(early.decided);
    EXPECT_TRUE(early.actions.empty());
    view.on(shard_gone{last}, t0);  // gone: nothing to wait for
    const auto step = view.on(decide{}, t0);
    EXPECT_TRUE(step.decided);
    EXPECT_EQ(of_kind(step, kind::read_tasks).size(), 1U);
}

// One transaction may create tasks in several shards: a decision waits for the shard reads
// that were out when it was due, and for those out once they are in (once, no more).
TEST_F(MasterFsm, ADecisionWaitsForTheShardReadsThatWereOut) {
    join("w1", 1);
    view.on(shard_reading{3}, t0);
    view.on(shard_reading{4}, t0);
    EXPECT_FALSE(view.on(decide{}, t0).decided);
    view.on(shard_read_done{3}, t0);
    EXPECT_FALSE(view.on(decide{}, t0).decided);  // 4 is still out
    view.on(shard_reading{5}, t0);
    view.on(shard_read_done{4}, t0);
    EXPECT_FALSE(view.on(decide{}, t0).decided);  // extended to 5, sent meanwhile
    view.on(shard_reading{6}, t0);
    view.on(shard_read_done{5}, t0);
    EXPECT_TRUE(view.on(decide{}, t0).decided);  // not extended again for 6
}

TEST_F(MasterFsm, WorkersAreReadFollowedAndRequeuedThroughActions) {
    live = {"w1", "w2"};
    auto step = view.on(master_saw::workers_listed{live}, t0);
    const auto reads = of_kind(step, kind::read_workers);
    ASSERT_EQ(reads.size(), 1U);
    EXPECT_EQ(reads[0].ids, (std::vector<std::string>{"w1", "w2"}));
    step = view.on(
        workers_read{
            {worker_node{"w1", worker_data(1, {"echo"}), true},
             worker_node{"w2", std::nullopt, false}}},
        t0
    );
    const auto follows = of_kind(step, kind::follow_worker);
    ASSERT_EQ(follows.size(), 1U);  // w2 was gone again by its read
    EXPECT_EQ(follows[0].id, "w1");
    EXPECT_TRUE(view.worker_alive("w1"));
    EXPECT_EQ(workers_listed({"w1", "w2"}).to_read, std::vector<std::string>{"w2"});
    step = view.on(master_saw::workers_listed{{}}, t0);
    EXPECT_EQ(requeued(step), std::vector<std::string>{"w1"});
    EXPECT_FALSE(view.worker_alive("w1"));
}

TEST_F(MasterFsm, WhatT6FindsWrittenBelowAnAssignmentIsClearedOnceAtATime) {
    const auto path = protocol::layout::assignment("w9", tid(5, 1));
    auto clears = of_kind(view.on(foreign_found{path}, t0), kind::clear_below);
    ASSERT_EQ(clears.size(), 1U);
    EXPECT_EQ(clears[0].path, path);
    EXPECT_TRUE(of_kind(view.on(foreign_found{path}, t0), kind::clear_below).empty());
    view.on(cleared{path}, t0);
    EXPECT_EQ(of_kind(view.on(foreign_found{path}, t0), kind::clear_below).size(), 1U);
}

namespace {

/// A master's /master as its fsm starts with it.
protocol::member_info master_node() {
    protocol::member_info m;
    m.id = "m1";
    m.host = "h";
    m.pid = 1;
    m.started_ms = 1;
    m.since_ms = 2;
    m.epoch = 7;
    m.max_pending = 1000;
    m.direct = true;
    return m;
}

}  // namespace

TEST_F(MasterFsm, TheThroughputFigureInMasterIsWrittenWhenItChanged) {
    join("w1", 4);
    // Nothing finished yet: the figure (0) stands.
    EXPECT_TRUE(
        of_kind(view.on(report_due{}, t0 + std::chrono::seconds(5)), kind::write_master).empty()
    );
    submit({tid(5, 1), tid(5, 2)});
    for (const auto& a : of_kind(view.on(decide{}, t0), kind::assign)) {
        view.on(answered{a, committed(3)}, t0);
    }
    view.on(master_saw::dir_listed{"w1", {}}, t0 + std::chrono::seconds(10));  // both finished
    // 2 tasks in the 20 s since the fsm started: 0.1 per second.
    const auto writes =
        of_kind(view.on(report_due{}, t0 + std::chrono::seconds(20)), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_FALSE(writes[0].again);
    protocol::member_info expected;
    expected.throughput = 0.1;
    EXPECT_EQ(writes[0].ops, protocol::master_report_ops(expected));
    // 2 in 21 s rounds to the same figure: not written again.
    EXPECT_TRUE(
        of_kind(view.on(report_due{}, t0 + std::chrono::seconds(21)), kind::write_master).empty()
    );
    // A minute later the finishes are out of the window: 0 again.
    const auto later =
        of_kind(view.on(report_due{}, t0 + std::chrono::seconds(100)), kind::write_master);
    ASSERT_EQ(later.size(), 1U);
    expected.throughput = 0.0;
    EXPECT_EQ(later[0].ops, protocol::master_report_ops(expected));
}

TEST(MasterFsmNode, MasterIsWrittenAgainWhenDeletedReplacedOrOverwrittenOneWriteAtATime) {
    master_stats stats;
    master_fsm::options opts;
    opts.master_node = master_node();
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    // Deleted: created again.
    auto writes = of_kind(view.on(master_node_read{false, false, {}, -1}, t0), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_TRUE(writes[0].again);
    EXPECT_EQ(writes[0].ops, protocol::master_node_ops(master_node(), false, -1));
    const auto data = writes[0].ops[0].data;
    // Replaced while that write is out: one write at a time.
    EXPECT_TRUE(
        of_kind(view.on(master_node_read{true, false, {}, 3}, t0), kind::write_master).empty()
    );
    view.on(master_node_written{}, t0);
    writes = of_kind(view.on(master_node_read{true, false, {}, 3}, t0), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_EQ(writes[0].ops, protocol::master_node_ops(master_node(), true, 3));
    view.on(master_node_written{}, t0);
    // Our own node, saying what it should: left alone.
    EXPECT_TRUE(
        of_kind(view.on(master_node_read{true, true, data, 0}, t0), kind::write_master).empty()
    );
    // Our own node, its data set by someone else: written again at the version read.
    writes = of_kind(view.on(master_node_read{true, true, "{}", 1}, t0), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_EQ(writes[0].ops, protocol::master_node_ops(master_node(), true, 1));
}

TEST(MasterFsmNode, WithNoSuspectsNothingIsWritten) {
    master_stats stats;
    master_fsm::options opts;
    opts.master_node = master_node();
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    EXPECT_TRUE(of_kind(view.on(stalls_checked{}, t0), kind::write_master).empty());
    EXPECT_EQ(stats.suspects, 0U);
}

TEST_F(MasterFsm, T6TakesADepartedWorkersTasksBackOneTransactionEachThenDeletesItsDirectory) {
    join("w1", 4);
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    const auto c = tid(5, 3);
    const auto marker = b + std::string(protocol::cancel_marker_suffix);
    ASSERT_TRUE(dir_listed("w1", {a, b, c, marker}));
    EXPECT_EQ(leave("w1"), std::vector<std::string>{"w1"});
    // Its directory listed: its assignments read.
    auto step = view.on(departed_listed{"w1", std::vector<std::string>{a, b, c, marker}}, t0);
    const auto reads = of_kind(step, kind::read_departed);
    ASSERT_EQ(reads.size(), 1U);
    EXPECT_EQ(reads[0].tids, (std::vector<std::string>{a, b, c}));
    EXPECT_EQ(reads[0].paths[0], protocol::layout::assignment("w1", a));
    // a back to pending, b cancelled (its marker), c lost (its last attempt); one is gone.
    step = view.on(
        departed_read{
            "w1",
            {departed_node{a, task_data()}, departed_node{b, task_data()},
             departed_node{c, task_data("echo", 3, 3)}, departed_node{tid(5, 4), std::nullopt}}},
        t0
    );
    const auto txns = of_kind(step, kind::requeue_task);
    ASSERT_EQ(txns.size(), 3U);
    EXPECT_EQ(txns[0].kind, protocol::departed_kind::requeue);
    EXPECT_EQ(txns[1].kind, protocol::departed_kind::cancel);
    EXPECT_EQ(txns[2].kind, protocol::departed_kind::lost);
    EXPECT_EQ(txns[0].path, protocol::layout::assignment("w1", a));
    master_step last;
    for (const auto& x : txns) {
        last = view.on(answered{x, committed(x.ops.size())}, t0);
    }
    EXPECT_EQ(stats.requeued, 1U);
    EXPECT_EQ(stats.cancelled, 1U);
    EXPECT_EQ(stats.lost, 1U);
    EXPECT_EQ(requeued(last), std::vector<std::string>{"w1"});  // all answered: listed again
    // Empty but for the marker: the marker goes, then the directory.
    step = view.on(departed_listed{"w1", std::vector<std::string>{marker}}, t0);
    EXPECT_EQ(of_kind(step, kind::remove_marker).size(), 1U);
    auto removes = of_kind(step, kind::remove_departed);
    ASSERT_EQ(removes.size(), 1U);
    EXPECT_EQ(removes[0].ops, protocol::remove_departed_dir_ops("w1"));
    // Not empty yet (an assignment racing in): listed again after a pause.
    view.on(
        answered{removes[0], failed(removes[0].ops.size(), 0, protocol::op_code::not_empty)}, t0
    );
    step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::list_departed).empty());
    ASSERT_TRUE(step.wake_at);
    EXPECT_EQ(*step.wake_at, t0 + milliseconds(100));
    EXPECT_EQ(requeued(view.on(decide{}, t0 + milliseconds(100))), std::vector<std::string>{"w1"});
    removes = of_kind(
        view.on(departed_listed{"w1", std::vector<std::string>{}}, t0), kind::remove_departed
    );
    ASSERT_EQ(removes.size(), 1U);
    view.on(answered{removes[0], committed(removes[0].ops.size())}, t0);
    // Forgotten: a worker of that name coming again is a new one, read.
    EXPECT_EQ(workers_listed({"w1"}).to_read, std::vector<std::string>{"w1"});
}

TEST_F(MasterFsm, T6ListsAgainAtOnceWhenAllWentThroughAndAfterAPauseWhenOneFailed) {
    join("w1", 4);
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    ASSERT_TRUE(dir_listed("w1", {a, b}));
    leave("w1");
    view.on(departed_listed{"w1", std::vector<std::string>{a, b}}, t0);
    auto txns = of_kind(
        view.on(
            departed_read{"w1", {departed_node{a, task_data()}, departed_node{b, task_data()}}}, t0
        ),
        kind::requeue_task
    );
    ASSERT_EQ(txns.size(), 2U);
    EXPECT_TRUE(of_kind(view.on(answered{txns[0], unknown()}, t0), kind::list_departed).empty());
    EXPECT_TRUE(
        of_kind(view.on(answered{txns[1], committed(txns[1].ops.size())}, t0), kind::list_departed)
            .empty()
    );  // one failed: after a pause
    EXPECT_TRUE(requeued(view.on(decide{}, t0 + milliseconds(99))).empty());
    EXPECT_EQ(requeued(view.on(decide{}, t0 + milliseconds(100))), std::vector<std::string>{"w1"});
    txns = of_kind(
        view.on(departed_read{"w1", {departed_node{a, task_data()}}}, t0), kind::requeue_task
    );
    ASSERT_EQ(txns.size(), 1U);
    EXPECT_EQ(
        requeued(view.on(answered{txns[0], committed(txns[0].ops.size())}, t0)),
        std::vector<std::string>{"w1"}
    );
}
