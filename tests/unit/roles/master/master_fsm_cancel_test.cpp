// SPDX-License-Identifier: MIT
// master_fsm (roles/master/detail/master_fsm.hpp), event by event: T7, cancel requests.
#include "unit/roles/master/master_fsm_fixture.hpp"

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::fsm_test;

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
