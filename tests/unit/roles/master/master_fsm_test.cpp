// SPDX-License-Identifier: MIT
// The master's decisions without ZooKeeper (roles/master/master_fsm.hpp): events in, actions out,
// the answers to its transactions fed back by hand. Time is a parameter: no test sleeps.
#include "roles/master/master_fsm.hpp"

#include "protocol/ids.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

using namespace zkd;
using namespace zkd::roles;
using kind = master_action::kind;
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

std::vector<master_action> of_kind(const master_step& s, kind k) {
    std::vector<master_action> out;
    std::copy_if(
        s.actions.begin(), s.actions.end(), std::back_inserter(out),
        [&](const master_action& a) { return a.what == k; }
    );
    return out;
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

    void join(
        const std::string& id,
        int capacity,
        std::vector<std::string> types = {"echo"},
        std::optional<int> threads = std::nullopt
    ) {
        live.push_back(id);
        const auto change = view.workers_listed(live);
        ASSERT_EQ(change.to_read, std::vector<std::string>{id});
        ASSERT_TRUE(
            view.worker_read(id, worker_data(capacity, std::move(types), false, threads), true)
        );
        ASSERT_TRUE(view.worker_dir_listed(id, {}));
    }

    std::vector<std::string> leave(const std::string& id) {
        std::erase(live, id);
        return view.workers_listed(live).departed;
    }

    /// Lists `tids` in shard 0 and answers the load the view asks for with `data`.
    void submit(const std::vector<std::string>& tids, const std::string& data = task_data()) {
        view.shard_listed(0, tids);
        load(data);
    }

    /// Submits 4 tasks and decides: the workers they go to, in queue order.
    std::string decide_four() {
        submit({tid(5, 1), tid(5, 2), tid(5, 3), tid(5, 4)});
        std::string order;
        for (const auto& a : of_kind(view.next(t0), kind::assign)) {
            order += a.worker + " ";
        }
        return order;
    }

    /// Answers the view's read of pending tasks, all with `data` (the only action due).
    void load(const std::string& data) {
        auto step = view.next(t0);
        ASSERT_EQ(step.actions.size(), 1U);
        auto loads = of_kind(step, kind::load);
        ASSERT_EQ(loads.size(), 1U);
        std::vector<task_read> reads;
        for (const auto& t : loads[0].tids) {
            reads.push_back(task_read{t, task_read::status::ok, data, 0});
        }
        EXPECT_FALSE(view.tasks_loaded(reads));
        view.load_finished();
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
    auto step = view.next(t0);
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
    EXPECT_TRUE(of_kind(view.next(t0), kind::assign).empty());
    view.done(assigns[0], committed(3), t0);
    view.done(assigns[1], committed(3), t0);
    EXPECT_EQ(stats.assigned, 2U);
    EXPECT_EQ(assigned_specs.size(), 2U);
    EXPECT_EQ(view.queue_depth(), 2U);
    EXPECT_TRUE(of_kind(view.next(t0), kind::assign).empty());
    // The worker finished one: its slot goes to the next in line.
    EXPECT_EQ(view.worker_dir_listed("w1", {first}), 1U);
    EXPECT_EQ(stats.finished, 1U);
    const auto next = of_kind(view.next(t0), kind::assign);
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
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);  // least loaded: one each
    for (const auto& x : assigns) {
        view.done(x, committed(3), t0);
    }
    EXPECT_FALSE(view.worker_dir_listing_wanted("w1"));  // 1 of 2 by the count
    const auto c = tid(5, 3);
    const auto d = tid(5, 4);
    submit({c, d});
    assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    // Nothing waits: no need yet.
    EXPECT_FALSE(view.worker_dir_listing_wanted("w1"));
    // A task waits: both directories are wanted, also while the assignments are still out.
    const auto e = tid(5, 5);
    submit({e});
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    EXPECT_TRUE(view.worker_dir_listing_wanted("w2"));
    for (const auto& x : assigns) {
        view.done(x, committed(3), t0);
    }
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    // The listing shows w1's tasks finished: room again, and the waiting task goes there.
    ASSERT_TRUE(view.worker_dir_listed("w1", {}));
    const auto next = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(next.size(), 1U);
    EXPECT_EQ(next[0].worker, "w1");
    EXPECT_EQ(next[0].tid, e);
    view.done(next[0], committed(3), t0);
    // The one still full: not wanted once the waiting task is on its way elsewhere.
    EXPECT_FALSE(view.worker_dir_listing_wanted("w2"));
    // An assignment that found the directory gone wants it listed (is it back?), and a
    // listing that finds it clears that.
    const auto f = tid(5, 6);
    submit({f});
    auto to_w1 = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(to_w1.size(), 1U);
    view.done(to_w1[0], failed(3, 2, protocol::op_code::no_node), t0);
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    ASSERT_TRUE(view.worker_dir_listed("w1", {e}));
    // f waits still (its next try after a pause): a change there would want a listing.
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    // An open cancel request wants every directory (it goes to the task's holder).
    view.cancels_listed({tid(5, 9)});
    EXPECT_TRUE(view.worker_dir_listing_wanted("w2"));
    // A departed worker: listing (and finding it gone) ends its follower.
    std::erase(live, "w2");
    (void)view.workers_listed(live);
    view.cancels_listed({});
    EXPECT_TRUE(view.worker_dir_listing_wanted("w2"));
}

// A directory whose watch fired may hold tasks clients placed there directly (docs/protocol.md
// §6 T1 "Direct placement"): its worker gets nothing until it is listed, and then only the room
// the listing leaves.
TEST_F(MasterFsm, AWorkerWhoseDirectoryChangedGetsNothingUntilItIsListed) {
    join("w1", 3);
    ASSERT_TRUE(view.worker_dir_listed("w1", {}));
    view.worker_dir_touched("w1");
    EXPECT_FALSE(view.worker_dir_listing_wanted("w1"));  // nothing waits
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    submit({a, b});
    EXPECT_TRUE(of_kind(view.next(t0), kind::assign).empty());
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    // Two tasks a client placed there: room for one more.
    ASSERT_TRUE(view.worker_dir_listed("w1", {tid(4, 7), tid(4, 8)}));
    const auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, a);
    view.done(assigns[0], committed(3), t0);
    EXPECT_TRUE(of_kind(view.next(t0), kind::assign).empty());  // b waits: full
}

// A worker just read (joined, or found at takeover) may hold tasks already: a dead master's,
// or ones clients placed there directly. It gets nothing until its directory is listed.
TEST_F(MasterFsm, AWorkerGetsNothingBeforeItsDirectoryIsFirstListed) {
    live.push_back("w1");
    ASSERT_EQ(view.workers_listed(live).to_read, std::vector<std::string>{"w1"});
    ASSERT_TRUE(view.worker_read("w1", worker_data(2, {"echo"}), true));
    const auto a = tid(5, 1);
    const auto b = tid(5, 2);
    submit({a, b});
    EXPECT_TRUE(of_kind(view.next(t0), kind::assign).empty());
    // The listing finds one task there (placed by a client): room for one more.
    ASSERT_TRUE(view.worker_dir_listed("w1", {tid(4, 7)}));
    const auto assigns = of_kind(view.next(t0), kind::assign);
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
    const auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    const auto to_w2 = assigns[0].worker == "w2" ? assigns[0] : assigns[1];
    const auto to_w1 = assigns[0].worker == "w1" ? assigns[0] : assigns[1];
    // w2 leaves while its assignment is out; its requeue finds nothing of ours there.
    std::erase(live, "w2");
    const auto change = view.workers_listed(live);
    ASSERT_EQ(change.departed, std::vector<std::string>{"w2"});
    view.departed_done("w2");
    view.done(to_w2, failed(3, 0, protocol::op_code::no_node), t0);  // check /workers/w2
    view.done(to_w1, committed(3), t0);
    // w1 is full by the count, and the task meant for w2 waits with nothing on its way.
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_TRUE(view.worker_dir_listing_wanted("w1"));
    ASSERT_TRUE(view.worker_dir_listed("w1", {}));
    const auto next = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(next.size(), 1U);
    EXPECT_EQ(next[0].worker, "w1");
    EXPECT_EQ(next[0].tid, to_w2.tid);
}

TEST_F(MasterFsm, OnlyWorkersServingTheTypeGetItAndDrainingOnesNone) {
    join("w1", 4, {"other"});
    join("w2", 4, {"echo"});
    submit({tid(5, 1)});
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].worker, "w2");
    view.done(assigns[0], committed(3), t0);

    ASSERT_TRUE(view.worker_updated("w2", worker_data(4, {"echo"}, true)));
    submit({tid(5, 2)});
    const auto step = view.next(t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    // Only a draining worker serves the type now: that counts as none, after the grace.
    EXPECT_TRUE(of_kind(step, kind::reject).empty());
    ASSERT_TRUE(step.wake_at);
    EXPECT_EQ(of_kind(view.next(*step.wake_at), kind::reject).size(), 1U);
}

TEST_F(MasterFsm, AMalformedTaskAndANameThatIsNoTaskIdEndInFailedResults) {
    join("w1", 2);
    submit({tid(5, 1)}, "{ this is not json");
    view.shard_listed(0, {tid(5, 1), "garbage"});
    auto rejects = of_kind(view.next(t0), kind::reject);
    ASSERT_EQ(rejects.size(), 2U);
    for (const auto& r : rejects) {
        EXPECT_EQ(r.code, protocol::codes::malformed_task);
        ASSERT_EQ(r.ops.size(), 2U);
        EXPECT_EQ(r.ops[0], protocol::txn_op::remove(view.pending_path(r.tid)));
    }
    view.done(rejects[0], committed(2), t0);
    view.done(rejects[1], failed(2, 0, protocol::op_code::no_node), t0);  // gone: forgotten too
    EXPECT_EQ(stats.rejected, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
    EXPECT_TRUE(view.next(t0).actions.empty());
}

TEST_F(MasterFsm, MalformedResultsCarryTheAttemptTheTaskIsOn) {
    join("w1", 2);
    submit({tid(5, 1)}, "{ this is not json");
    auto rejects = of_kind(view.next(t0), kind::reject);
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
    view.shard_listed(0, {bundle, plain});
    auto loads = of_kind(view.next(t0), kind::load);
    ASSERT_EQ(loads.size(), 1U);
    std::vector<task_read> reads;
    for (const auto& t : loads[0].tids) {
        reads.push_back(task_read{
            t, task_read::status::ok, protocol::encode(t == bundle ? two : with_array), 0});
    }
    EXPECT_FALSE(view.tasks_loaded(reads));
    view.load_finished();
    const auto step = view.next(t0);
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
    auto step = view.next(t0);
    EXPECT_TRUE(of_kind(step, kind::reject).empty());
    ASSERT_TRUE(step.wake_at);
    EXPECT_EQ(*step.wake_at, t0 + milliseconds(10'000));
    EXPECT_TRUE(of_kind(view.next(t0 + milliseconds(9'999)), kind::reject).empty());
    auto rejects = of_kind(view.next(t0 + milliseconds(10'000)), kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].code, protocol::codes::unknown_type);
}

TEST_F(MasterFsm, NoWorkersAtAllIsNoReasonToRejectOrEvenRead) {
    view.shard_listed(0, {tid(5, 1)});
    const auto step = view.next(t0 + std::chrono::hours(1));
    EXPECT_TRUE(step.actions.empty());
    EXPECT_EQ(view.queue_depth(), 1U);
}

TEST_F(MasterFsm, AFailingAssignmentBacksOffAndEndsFailedAfterMaxTries) {
    join("w1", 1);
    const auto t = tid(5, 1);
    submit({t});
    auto now = t0;
    milliseconds expected_wait(200);
    for (int i = 1; i <= master_fsm::max_assign_failures; ++i) {
        auto assigns = of_kind(view.next(now), kind::assign);
        ASSERT_EQ(assigns.size(), 1U) << "try " << i;
        view.done(assigns[0], failed(3, 1, protocol::op_code::other), now);
        if (i == master_fsm::max_assign_failures) {
            break;
        }
        const auto step = view.next(now);
        EXPECT_TRUE(of_kind(step, kind::assign).empty()) << "no retry before its time";
        ASSERT_TRUE(step.wake_at);
        EXPECT_EQ(*step.wake_at, now + expected_wait);
        now += expected_wait;
        expected_wait *= 2;
    }
    auto rejects = of_kind(view.next(now), kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].code, protocol::codes::malformed_task);
    EXPECT_NE(rejects[0].why.find("cannot be assigned"), std::string::npos);
}

TEST_F(MasterFsm, LostAnswersAreRetriedForeverNeverFailingTheTask) {
    join("w1", 1);
    submit({tid(5, 1)});
    auto now = t0;
    for (int i = 0; i < 10; ++i) {
        const auto step = view.next(now);
        EXPECT_TRUE(of_kind(step, kind::reject).empty());
        auto assigns = of_kind(step, kind::assign);
        ASSERT_EQ(assigns.size(), 1U) << "try " << i;
        view.done(assigns[0], unknown(), now);
        now += milliseconds(5'000);  // the longest wait
    }
    EXPECT_TRUE(of_kind(view.next(now), kind::reject).empty());
}

TEST_F(MasterFsm, AnAnswerSayingTheTaskIsGoneOrTheWorkerLeftIsNoTrouble) {
    join("w1", 2);
    submit({tid(5, 1), tid(5, 2)});
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    view.done(assigns[0], failed(3, 1, protocol::op_code::no_node), t0);  // cancelled meanwhile
    view.done(assigns[1], failed(3, 0, protocol::op_code::no_node), t0);  // worker check failed
    EXPECT_EQ(view.queue_depth(), 1U);
    const auto again = of_kind(view.next(t0), kind::assign);  // at once, no backoff
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].tid, tid(5, 2));
}

TEST_F(MasterFsm, ADeletedWorkerDirectoryStopsAssignmentsThereUntilItIsBack) {
    join("w1", 2);
    submit({tid(5, 1)});
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    view.done(assigns[0], failed(3, 2, protocol::op_code::no_node), t0);
    EXPECT_TRUE(of_kind(view.next(t0), kind::assign).empty());
    view.worker_dir_back("w1");
    EXPECT_EQ(of_kind(view.next(t0), kind::assign).size(), 1U);
}

TEST_F(MasterFsm, ADeposedMasterNotesNoTroubleForItsFailures) {
    join("w1", 1);
    submit({tid(5, 1)});
    auto assigns = of_kind(view.next(t0), kind::assign);
    stats.deposed = true;
    view.done(assigns[0], failed(3, 1, protocol::op_code::other), t0);
    const auto step = view.next(t0);
    EXPECT_FALSE(step.wake_at);
    EXPECT_EQ(of_kind(step, kind::assign).size(), 1U);
}

TEST_F(MasterFsm, CancelOfAPendingTaskFailsItCancelled) {
    join("w1", 1, {"other"});
    const auto t = tid(5, 1);
    view.shard_listed(0, {t});
    view.cancels_listed({t});
    auto cancels = of_kind(view.next(t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops[0], protocol::txn_op::remove(view.pending_path(t)));
    EXPECT_EQ(cancels[0].ops[2], protocol::txn_op::remove(protocol::layout::cancel_request(t)));
    EXPECT_TRUE(of_kind(view.next(t0), kind::cancel).empty());  // one at a time
    view.done(cancels[0], committed(3), t0);
    EXPECT_EQ(stats.cancelled, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, CancelOfAnAssignedTaskLeavesAMarkerForItsWorker) {
    join("w1", 1);
    const auto t = tid(5, 1);
    ASSERT_TRUE(view.worker_dir_listed("w1", {t}));
    view.cancels_listed({t});
    auto cancels = of_kind(view.next(t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::cancel_assigned_ops("w1", t));
}

TEST_F(MasterFsm, ACancelArrivingWhileT2IsInFlightWaitsAndTheWorkerDyingMakesItAPendingCancel) {
    join("w1", 1);
    const auto t = tid(5, 1);
    submit({t});
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    view.cancels_listed({t});
    EXPECT_TRUE(of_kind(view.next(t0), kind::cancel).empty()) << "decided when T2 lands";
    EXPECT_EQ(leave("w1"), std::vector<std::string>{"w1"});
    // T2 failed on the worker's check: the task is still pending here, and cancelled so.
    view.done(assigns[0], failed(3, 0, protocol::op_code::no_node), t0);
    auto step = view.next(t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    auto cancels = of_kind(step, kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops[0], protocol::txn_op::remove(view.pending_path(t)));
    view.done(cancels[0], committed(3), t0);
    EXPECT_EQ(view.queue_depth(), 0U);
    view.departed_done("w1");
    EXPECT_FALSE(view.worker_alive("w1"));
}

TEST_F(MasterFsm, ACancelWhoseMarkerFindsTheAssignmentGoneFollowsTheTaskBackToPending) {
    join("w1", 1);
    const auto t = tid(5, 1);
    submit({t});
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    view.cancels_listed({t});
    view.done(assigns[0], committed(3), t0);
    // The task sits in w1's directory: a marker goes there.
    auto cancels = of_kind(view.next(t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::cancel_assigned_ops("w1", t));
    // The worker dies and T6 moves the task back to pending before the marker lands: the
    // marker's check of the assignment fails.
    EXPECT_EQ(leave("w1"), std::vector<std::string>{"w1"});
    view.done(cancels[0], failed(3, 0, protocol::op_code::no_node), t0);
    EXPECT_EQ(stats.cancelled, 0U);
    view.shard_listed(0, {t});
    // The request still stands: the task is cancelled where it is now, not left to run again
    // with its request dropped.
    auto again = of_kind(view.next(t0), kind::cancel);
    ASSERT_EQ(again.size(), 1U);
    EXPECT_EQ(again[0].ops[0], protocol::txn_op::remove(view.pending_path(t)));
    view.done(again[0], committed(3), t0);
    EXPECT_EQ(stats.cancelled, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ACancelWhoseMarkerFindsTheTaskFinishedIsDroppedAfterTheUsualWait) {
    join("w1", 1);
    const auto t = tid(5, 1);
    ASSERT_TRUE(view.worker_dir_listed("w1", {t}));
    view.cancels_listed({t});
    auto cancels = of_kind(view.next(t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    view.done(cancels[0], failed(3, 0, protocol::op_code::no_node), t0);  // finished meanwhile
    // Not sent again as a marker (its directory listing is not in yet), and only dropped
    // once unknown for the usual 30 s.
    EXPECT_TRUE(of_kind(view.next(t0), kind::cancel).empty());
    auto drop = of_kind(view.next(t0 + milliseconds(30'000)), kind::cancel);
    ASSERT_EQ(drop.size(), 1U);
    EXPECT_EQ(drop[0].ops, protocol::drop_cancel_ops(t));
}

TEST_F(MasterFsm, APendingTaskThatVanishedUnderACancelIsForgottenNotCancelledInALoop) {
    join("w1", 1, {"other"});
    const auto t = tid(5, 1);
    view.shard_listed(0, {t});
    view.cancels_listed({t});
    auto cancels = of_kind(view.next(t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    // Its shard's listing came while the cancel was out (and kept it, being in flight).
    view.shard_listed(0, {});
    view.done(cancels[0], failed(3, 0, protocol::op_code::no_node), t0);
    EXPECT_EQ(view.queue_depth(), 0U);
    EXPECT_TRUE(of_kind(view.next(t0), kind::cancel).empty());
}

TEST_F(MasterFsm, ACancelForATaskUnknownHereIsDroppedOnlyAfterThirtySeconds) {
    join("w1", 1);
    const auto t = tid(5, 1);
    view.cancels_listed({t});
    EXPECT_TRUE(of_kind(view.next(t0), kind::cancel).empty());
    EXPECT_TRUE(of_kind(view.next(t0 + milliseconds(29'999)), kind::cancel).empty());
    auto cancels = of_kind(view.next(t0 + milliseconds(30'000)), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::drop_cancel_ops(t));
}

TEST_F(MasterFsm, ForeignChildrenAreClearedBeforeTheTaskIsCancelled) {
    join("w1", 1, {"other"});
    const auto t = tid(5, 1);
    view.shard_listed(0, {t});
    view.cancels_listed({t});
    auto cancels = of_kind(view.next(t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    view.done(cancels[0], failed(3, 0, protocol::op_code::not_empty), t0);
    auto step = view.next(t0);
    auto clears = of_kind(step, kind::clear_foreign);
    ASSERT_EQ(clears.size(), 1U);
    EXPECT_EQ(clears[0].path, view.pending_path(t));
    EXPECT_TRUE(of_kind(step, kind::cancel).empty());
    EXPECT_FALSE(view.begin_clearing(clears[0].path));  // once at a time
    view.foreign_cleared(clears[0].path);
    EXPECT_EQ(of_kind(view.next(t0), kind::cancel).size(), 1U);
}

TEST_F(MasterFsm, AWorkerLeavingWithTasksIsHandedToT6AndForgottenAfter) {
    join("w1", 3);
    join("w2", 3);
    ASSERT_TRUE(view.worker_dir_listed("w1", {tid(5, 1), tid(5, 2)}));
    EXPECT_EQ(leave("w1"), std::vector<std::string>{"w1"});
    EXPECT_TRUE(leave("w9").empty());
    EXPECT_FALSE(view.worker_dir_listed("w1", {}));  // T6 owns the directory now
    EXPECT_FALSE(view.worker_updated("w1", worker_data(3, {"echo"})));
    EXPECT_FALSE(view.worker_dir_missing("w1"));
    // Its tasks come back pending (T6) and go to the live worker.
    submit({tid(5, 1), tid(5, 2)});
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 2U);
    EXPECT_EQ(assigns[0].worker, "w2");
    view.departed_done("w1");
    // A directory without a worker (a dead master's leftover) is handed to T6 once.
    EXPECT_EQ(
        view.assign_dirs_listed({"w1", "w2", "w3"}, {"w2"}), (std::vector<std::string>{"w1", "w3"})
    );
    EXPECT_TRUE(view.assign_dirs_listed({"w1", "w3"}, {"w2"}).empty());
}

TEST_F(MasterFsm, WorkerNodesThatAreNotAWorkersSessionAreIgnored) {
    live = {"p1", "g1"};
    const auto change = view.workers_listed(live);
    EXPECT_EQ(change.to_read.size(), 2U);
    EXPECT_FALSE(view.worker_read("p1", worker_data(4, {"echo"}), false));  // persistent
    EXPECT_FALSE(view.worker_read("g1", "garbage", true));
    EXPECT_TRUE(view.workers_listed(live).to_read.empty());  // not read again
    view.shard_listed(0, {tid(5, 1)});
    EXPECT_TRUE(view.next(t0).actions.empty());
}

TEST_F(MasterFsm, AFinishedBundleCountsItsTasks) {
    join("w1", 2);
    const auto bundle = protocol::bundle_id(tid(5, 1), 3);
    ASSERT_TRUE(
        view.worker_dir_listed("w1", {bundle, bundle + std::string(protocol::cancel_marker_suffix)})
    );
    EXPECT_EQ(view.worker_dir_listed("w1", {}), 3U);
}

TEST_F(MasterFsm, APendingNodeThatVanishesBeforeItIsReadIsForgotten) {
    join("w1", 1);
    view.shard_listed(0, {tid(5, 1)});
    auto loads = of_kind(view.next(t0), kind::load);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_TRUE(of_kind(view.next(t0), kind::load).empty());  // one batch at a time
    EXPECT_TRUE(view.tasks_loaded({task_read{tid(5, 1), task_read::status::error, {}, 0}}));
    view.load_finished();
    loads = of_kind(view.next(t0), kind::load);
    ASSERT_EQ(loads.size(), 1U) << "read again after an error";
    EXPECT_FALSE(view.tasks_loaded({task_read{tid(5, 1), task_read::status::gone, {}, 0}}));
    view.load_finished();
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ListingsAreDiffedPerShardAndTheQueueKeepsIdOrderWithBundlesAndGarbage) {
    // The view keeps ids in a compact form (roles/master/task_key.hpp): its order is still the ids'
    // string order, bundles ("_10" before "_9") and names that are no task id included.
    join("w1", 1);
    const auto a = tid(5, 1);
    const auto a10 = protocol::bundle_id(a, 10);
    const auto a9 = protocol::bundle_id(a, 9);
    const auto b = tid(5, 2);
    const auto c = tid(9, 3);
    view.shard_listed(0, {b, a9, "not-a-task", a, a10});
    view.shard_listed(1, {c, b});  // b is pending in shard 0 already: it stays there
    EXPECT_EQ(view.queue_depth(), 6U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(0) + "/" + b);
    EXPECT_EQ(view.pending_path(c), protocol::layout::pending_shard(1) + "/" + c);
    auto step = view.next(t0);
    const auto rejects = of_kind(step, kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].tid, "not-a-task");
    const auto loads = of_kind(step, kind::load);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, (std::vector<std::string>{c, a, a10, a9, b}));
    std::vector<task_read> reads;
    for (const auto& t : loads[0].tids) {
        reads.push_back(task_read{t, task_read::status::ok, task_data(), 0});
    }
    EXPECT_FALSE(view.tasks_loaded(reads));
    view.load_finished();
    step = view.next(t0);
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, c);  // the highest priority first, from whichever shard
    // c's node is gone while its assignment is out: kept until the answer says so.
    view.shard_listed(1, {});
    EXPECT_EQ(view.queue_depth(), 6U);
    // a is gone from shard 0 without us: forgotten; the others stay.
    view.shard_listed(0, {b, "not-a-task", a9, a10});
    EXPECT_EQ(view.queue_depth(), 5U);
    view.done(assigns[0], committed(assigns[0].ops.size()), t0);
    EXPECT_EQ(view.queue_depth(), 4U);
    // b came back in shard 1 after shard 0 lost it: a new task there.
    view.shard_listed(0, {"not-a-task", a9, a10});
    EXPECT_EQ(view.queue_depth(), 3U);
    view.shard_listed(1, {b});
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
    view.shard_logged(0, {logged(tid(5, 1))});
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    const auto step = view.next(t0);
    EXPECT_TRUE(of_kind(step, kind::load).empty());
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, tid(5, 1));
    EXPECT_EQ(assigns[0].worker, "w1");
    view.done(assigns[0], committed(assigns[0].ops.size()), t0);
    EXPECT_EQ(stats.assigned, 1U);
    EXPECT_EQ(view.queue_depth(), 0U);
}

TEST_F(MasterFsm, ALoggedTaskWithoutDataOrBeyondTheLoadWindowIsReadWhenItsTurnComes) {
    join("w1", 1);  // a window of 32 + 1 tasks
    std::vector<protocol::log_entry> entries;
    for (int i = 1; i <= 40; ++i) {
        entries.push_back(logged(tid(5, i)));
    }
    view.shard_logged(0, std::move(entries));
    EXPECT_EQ(view.queue_depth(), 40U);
    EXPECT_EQ(stats.tasks_from_logs, 33U);  // the others' data is kept aside
    EXPECT_GT(view.logged_data_bytes(), 7 * task_data().size());
    auto step = view.next(t0);
    ASSERT_EQ(of_kind(step, kind::assign).size(), 1U);
    EXPECT_EQ(of_kind(step, kind::assign)[0].tid, tid(5, 1));
    EXPECT_TRUE(of_kind(step, kind::load).empty());  // 32 loaded wait for the slot
    // A name that came without its data (the transaction's budget ran out) is read.
    view.done(of_kind(step, kind::assign)[0], committed(3), t0);
    view.shard_listed(0, {});  // everything taken or gone
    view.shard_logged(0, {logged(tid(5, 50), std::nullopt)});
    EXPECT_EQ(stats.tasks_from_logs, 33U);
    step = view.next(t0);
    const auto loads = of_kind(step, kind::load);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{tid(5, 50)});
}

TEST_F(MasterFsm, WithoutWorkersALoggedTasksDataIsKeptAsideAndTakenWhenItMayBePlaced) {
    view.shard_logged(0, {logged(tid(5, 1))});
    EXPECT_EQ(view.queue_depth(), 1U);
    EXPECT_EQ(stats.tasks_from_logs, 0U);
    EXPECT_GT(view.logged_data_bytes(), 0U);
    EXPECT_TRUE(view.next(t0).actions.empty());
    join("w1", 1);
    const auto step = view.next(t0);
    EXPECT_TRUE(of_kind(step, kind::load).empty());  // no read: the log had it
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
    view.shard_logged(0, {logged(tid(5, 1)), logged(tid(5, 2))});
    EXPECT_EQ(view.queue_depth(), 2U);
    EXPECT_GT(view.logged_data_bytes(), 0U);
    EXPECT_LE(view.logged_data_bytes(), opts.logged_data_budget);
    ASSERT_TRUE(view.workers_listed({"w1"}).to_read == std::vector<std::string>{"w1"});
    ASSERT_TRUE(view.worker_read("w1", worker_data(2, {"echo"}), true));
    ASSERT_TRUE(view.worker_dir_listed("w1", {}));
    const auto step = view.next(clock_type::time_point{} + std::chrono::hours(1));
    const auto loads = of_kind(step, kind::load);
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
    view.shard_listed(0, {a, b});
    view.shard_logged(0, {logged(b), logged(gone), logged(tid(5, 4), std::nullopt)}, true);
    EXPECT_EQ(view.queue_depth(), 2U);  // a name the listing lacks is gone, not new
    EXPECT_EQ(stats.tasks_from_logs, 1U);
    const auto step = view.next(t0);
    const auto loads = of_kind(step, kind::load);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{a});  // only the missed one is read
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, b);
    // Once read (or placed), a task's data is not taken from a later log again.
    view.shard_logged(0, {logged(a, task_data("echo", 2))}, true);
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
    view.shard_listed(1, {first});
    view.shard_logged(0, {logged(second)});
    auto step = view.next(t0);
    EXPECT_TRUE(of_kind(step, kind::assign).empty());
    auto loads = of_kind(step, kind::load);
    ASSERT_EQ(loads.size(), 1U);
    EXPECT_EQ(loads[0].tids, std::vector<std::string>{first});
    // Still being read: the slot stays free for it.
    EXPECT_TRUE(view.next(t0).actions.empty());
    EXPECT_FALSE(view.tasks_loaded({task_read{first, task_read::status::ok, task_data(), 0}}));
    view.load_finished();
    step = view.next(t0);
    auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, first);
    view.done(assigns[0], committed(assigns[0].ops.size()), t0);
    // With more free slots than unread tasks ahead of it, a task with its data goes at once:
    // the slot it takes is nobody's.
    join("w2", 3);
    const auto third = tid(5, 3);
    const auto fourth = tid(5, 4);
    view.shard_listed(1, {third});
    view.shard_logged(0, {logged(second), logged(fourth)});
    step = view.next(t0);
    loads = of_kind(step, kind::load);
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
    view.shard_listed(1, {b});
    view.shard_logged(0, {logged(a), logged(b), logged(c), logged("not-a-task", "{}")});
    EXPECT_EQ(view.queue_depth(), 4U);
    EXPECT_EQ(view.pending_path(b), protocol::layout::pending_shard(1) + "/" + b);  // seen first
    auto step = view.next(t0);
    const auto rejects = of_kind(step, kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].tid, "not-a-task");
    view.done(rejects[0], committed(rejects[0].ops.size()), t0);
    const auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].tid, a);
    EXPECT_EQ(view.queue_depth(), 3U);
    // Logged again (a listing raced the log): nothing changes, the assignment stays out.
    view.shard_logged(0, {logged(a)});
    EXPECT_EQ(view.queue_depth(), 3U);
    // A listing of shard 0 that lacks a logged name forgets it, as it would a listed one.
    view.shard_listed(0, {a});
    EXPECT_EQ(view.queue_depth(), 2U);  // a (in flight) and b (shard 1)
    view.done(assigns[0], committed(assigns[0].ops.size()), t0);
    EXPECT_EQ(view.queue_depth(), 1U);
}

TEST_F(MasterFsm, ALoggedTaskWhoseDataIsGarbageEndsInAFailedResult) {
    join("w1", 1);
    view.shard_logged(0, {logged(tid(5, 1), "not json")});
    const auto rejects = of_kind(view.next(t0), kind::reject);
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
    auto assigns = of_kind(view.next(t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].worker, "w2");
    view.done(assigns[0], committed(3), t0);
    // Fresh tasks: one goes to w1 as its probe, the rest to w2 while it has room.
    submit({tid(5, 2), tid(5, 3), tid(5, 4)});
    assigns = of_kind(view.next(t0), kind::assign);
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
