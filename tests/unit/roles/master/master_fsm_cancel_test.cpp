// SPDX-License-Identifier: MIT
// master_fsm (roles/master/detail/master_fsm.hpp), event by event: T7, cancel requests.
#include "protocol/delay.hpp"
#include "unit/roles/master/master_fsm_fixture.hpp"

#include <boost/json.hpp>

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::fsm_test;

namespace {

/// A bundle of two tasks of `type` back in the queue after task 0 was published early (§6
/// T4e): its node has task 0's `finished` entry and `published`.
std::string published_bundle(const std::string& type) {
    protocol::task_node t;
    t.task.type = type;
    t.task.bundle = {boost::json::value(1), boost::json::value(2)};
    t.task.submitted_ms = 1763733600123;
    t.assigned.attempt = 2;
    protocol::task_result done;
    done.value = 7;
    auto held = protocol::with_published(protocol::encode(t), 2, {{0, done}});
    EXPECT_TRUE(held);
    auto o = boost::json::parse(held.value_or("{}")).as_object();
    o["entry_results"] = true;
    return boost::json::serialize(o);
}

/// The result a transaction of the master creates (its last create).
protocol::task_result created_result(const std::vector<protocol::txn_op>& ops) {
    for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
        if (it->what == protocol::txn_op::kind::create) {
            auto r = protocol::decode_result(it->data);
            EXPECT_TRUE(r) << r.error().message;
            return r ? *r : protocol::task_result{};
        }
    }
    ADD_FAILURE() << "no create";
    return {};
}

}  // namespace

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

TEST_F(MasterFsm, CancelOfAPendingBundleReadAlreadyKeepsItsPublishedTasks) {
    join("w1", 2);
    const auto b = protocol::bundle_id(tid(5, 1), 2);
    view.on(shard_listed{0, {b}}, t0);
    load(published_bundle("nobody"));
    view.on(cancels_listed{{b}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    const auto r = created_result(cancels[0].ops);
    EXPECT_EQ(r.state, protocol::task_state::failed) << "1 of 2 tasks did not succeed (§5.1)";
    EXPECT_EQ(r.published, (std::vector<std::size_t>{0})) << "task 0 has its own result";
    ASSERT_EQ(r.bundle.size(), 2U);
    EXPECT_EQ(r.bundle[0].state, protocol::task_state::succeeded);
    EXPECT_EQ(r.bundle[1].state, protocol::task_state::cancelled);
}

TEST_F(MasterFsm, ARejectOfAPendingBundleKeepsItsPublishedTasks) {
    join("w1", 2);
    const auto b = protocol::bundle_id(tid(5, 1), 2);
    view.on(shard_listed{0, {b}}, t0);
    load(published_bundle("nobody"));
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::reject).empty());
    auto rejects = of_kind(view.on(decide{}, t0 + milliseconds(10'000)), kind::reject);
    ASSERT_EQ(rejects.size(), 1U);
    EXPECT_EQ(rejects[0].code, protocol::codes::unknown_type);
    const auto r = created_result(rejects[0].ops);
    EXPECT_EQ(r.published, (std::vector<std::size_t>{0})) << "task 0 has its own result";
    ASSERT_EQ(r.bundle.size(), 2U);
    EXPECT_EQ(r.bundle[0].state, protocol::task_state::succeeded);
    EXPECT_EQ(r.bundle[1].state, protocol::task_state::failed);
}

}  // namespace ZKD_UNITY_ID
