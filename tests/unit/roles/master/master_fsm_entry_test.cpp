// SPDX-License-Identifier: MIT
// master_fsm (roles/master/detail/master_fsm.hpp), event by event: T7 for one task of a
// bundle, a request `/cancel/<bundle>.<k>` (docs/protocol.md §6 T7 "One task of a bundle"),
// and T6 carrying such a task's marker back to a request.
#include "protocol/ids.hpp"
#include "unit/roles/master/master_fsm_fixture.hpp"

#include <algorithm>

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::fsm_test;

namespace {

/// A bundle of `n` echo tasks, as its node holds it.
std::string bundle_data(std::size_t n) {
    protocol::task_node t;
    t.task.type = "echo";
    for (std::size_t i = 0; i < n; ++i) {
        t.task.bundle.emplace_back(static_cast<std::int64_t>(i));
    }
    t.assigned.attempt = 1;
    t.task.max_attempts = 3;
    t.task.submitted_ms = 1763733600123;
    return protocol::encode(t);
}

bool creates(const std::vector<protocol::txn_op>& ops, const std::string& path) {
    return std::any_of(ops.begin(), ops.end(), [&](const auto& op) {
        return op.what == protocol::txn_op::kind::create && op.path == path;
    });
}

}  // namespace

TEST_F(MasterFsm, CancelOfOneTaskOfAnAssignedBundleLeavesThatTasksMarker) {
    join("w1", 1);
    const auto bundle = protocol::bundle_id(tid(5, 1), 5);
    const auto entry = protocol::bundled_task_id(bundle, 2);
    ASSERT_TRUE(dir_listed("w1", {bundle}));
    view.on(cancels_listed{{entry}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::cancel_entry_ops("w1", bundle, entry));
    ASSERT_EQ(cancels[0].ops.size(), 3U);
    EXPECT_EQ(
        cancels[0].ops[0], protocol::txn_op::check(protocol::layout::assignment("w1", bundle))
    );
    EXPECT_EQ(
        cancels[0].ops[1], protocol::txn_op::create("/assign/w1/" + bundle + ".2.cancel", "")
    );
    EXPECT_EQ(cancels[0].ops[2], protocol::txn_op::remove(protocol::layout::cancel_request(entry)));
    view.on(answered{cancels[0], committed(3)}, t0);
    EXPECT_EQ(stats.cancelled, 1U);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());
}

TEST_F(MasterFsm, ARequestForOneTaskOfAPendingBundleStandsUntilTheBundleIsAssigned) {
    join("w1", 1);
    const auto bundle = protocol::bundle_id(tid(5, 1), 3);
    const auto entry = protocol::bundled_task_id(bundle, 0);
    view.on(shard_listed{0, {bundle}}, t0);
    view.on(cancels_listed{{entry}}, t0);
    auto step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::cancel).empty()) << "the bundle is not cancelled for it";
    auto loads = of_kind(step, kind::read_tasks);
    ASSERT_EQ(loads.size(), 1U);
    ASSERT_EQ(loads[0].tids, std::vector<std::string>{bundle});
    view.on(tasks_read{{task_read{bundle, task_read::status::ok, bundle_data(3), 0}}}, t0);
    step = view.on(decide{}, t0);
    EXPECT_TRUE(of_kind(step, kind::cancel).empty()) << "T2 first";
    auto assigns = of_kind(step, kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    // While T2 is out, nothing; a request for a known bundle is never unknown, so never dropped.
    EXPECT_TRUE(of_kind(view.on(decide{}, t0 + milliseconds(31'000)), kind::cancel).empty());
    view.on(answered{assigns[0], committed(assigns[0].ops.size())}, t0);
    auto cancels = of_kind(view.on(decide{}, t0 + milliseconds(31'000)), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    EXPECT_EQ(cancels[0].ops, protocol::cancel_entry_ops("w1", bundle, entry));
}

TEST_F(MasterFsm, ARequestForATaskOfAnUnknownBundleIsDroppedAfterTheUsualWait) {
    join("w1", 1);
    const auto entry = protocol::bundled_task_id(protocol::bundle_id(tid(5, 1), 3), 1);
    view.on(cancels_listed{{entry}}, t0);
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());
    auto drop = of_kind(view.on(decide{}, t0 + milliseconds(30'000)), kind::cancel);
    ASSERT_EQ(drop.size(), 1U);
    EXPECT_EQ(drop[0].ops, protocol::drop_cancel_ops(entry));
}

TEST_F(MasterFsm, AMarkerThatFindsTheBundleGoneForgetsTheBundleAndTheRequestStands) {
    join("w1", 1);
    const auto bundle = protocol::bundle_id(tid(5, 1), 2);
    const auto entry = protocol::bundled_task_id(bundle, 1);
    ASSERT_TRUE(dir_listed("w1", {bundle}));
    view.on(cancels_listed{{entry}}, t0);
    auto cancels = of_kind(view.on(decide{}, t0), kind::cancel);
    ASSERT_EQ(cancels.size(), 1U);
    view.on(answered{cancels[0], failed(3, 0, protocol::op_code::no_node)}, t0);
    // The bundle is no longer w1's here: not forwarded there again; unknown, dropped later.
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::cancel).empty());
    auto drop = of_kind(view.on(decide{}, t0 + milliseconds(30'000)), kind::cancel);
    ASSERT_EQ(drop.size(), 1U);
    EXPECT_EQ(drop[0].ops, protocol::drop_cancel_ops(entry));
}

TEST_F(MasterFsm, T6TurnsTheMarkersOfARequeuedBundlesTasksBackIntoRequests) {
    join("w1", 4);
    const auto bundle = protocol::bundle_id(tid(5, 1), 4);
    const auto one = protocol::bundled_task_id(bundle, 1);
    const auto three = protocol::bundled_task_id(bundle, 3);
    const auto other = tid(5, 2);
    ASSERT_TRUE(dir_listed("w1", {bundle, other, one + ".cancel", three + ".cancel"}));
    view.on(cancels_listed{{three}}, t0);  // asked again meanwhile: not created twice
    leave("w1");
    view.on(
        departed_listed{
            "w1", std::vector<std::string>{bundle, other, one + ".cancel", three + ".cancel"}},
        t0
    );
    auto txns = of_kind(
        view.on(
            departed_read{
                "w1", {departed_node{bundle, bundle_data(4)}, departed_node{other, task_data()}}},
            t0
        ),
        kind::requeue_task
    );
    ASSERT_EQ(txns.size(), 2U);
    const auto& b = txns[0].tid == bundle ? txns[0] : txns[1];
    const auto& o = txns[0].tid == bundle ? txns[1] : txns[0];
    EXPECT_EQ(b.kind, protocol::departed_kind::requeue);
    EXPECT_TRUE(creates(b.ops, protocol::layout{}.pending_task(bundle)));
    const auto tail = protocol::requeue_entry_cancels_ops("w1", {one, three}, {false, true}, 0);
    ASSERT_EQ(tail.size(), 3U);  // two deletes, one create
    EXPECT_TRUE(creates(b.ops, protocol::layout::cancel_request(one)));
    EXPECT_FALSE(creates(b.ops, protocol::layout::cancel_request(three)));
    EXPECT_NE(
        std::find(
            b.ops.begin(), b.ops.end(),
            protocol::txn_op::remove(protocol::layout::cancel_marker("w1", three))
        ),
        b.ops.end()
    );
    // The plain task's T6 is as ever.
    EXPECT_FALSE(creates(o.ops, protocol::layout::cancel_request(one)));
}

TEST_F(MasterFsm, ABundleTakenBackFromAStalledWorkerKeepsItsTasksRequests) {
    join("w1", 8);
    const auto bundle = protocol::bundle_id(tid(4, 9), 2);
    const auto one = protocol::bundled_task_id(bundle, 1);
    const master_saw::stall_dirs_listed round{
        {"w1"}, {std::vector<std::string>{bundle, one + ".cancel"}}};
    EXPECT_TRUE(of_kind(view.on(round, t0), kind::read_assignments).empty());
    const auto reads = of_kind(view.on(round, t0), kind::read_assignments);
    ASSERT_EQ(reads.size(), 1U);
    ASSERT_EQ(reads[0].tids, std::vector<std::string>{bundle});
    protocol::task_node unstarted = *protocol::decode_task_node(bundle_data(2));
    unstarted.assigned.assigned_ms = 1'000;
    const auto takes = of_kind(
        view.on(
            assignments_read{
                "w1",
                {assignment_node{
                    bundle, assignment_node::status::ok, protocol::encode(unstarted), 0, 4}},
                1'000 + 10'000},
            t0
        ),
        kind::take_back
    );
    ASSERT_EQ(takes.size(), 1U);
    EXPECT_EQ(takes[0].kind, protocol::departed_kind::requeue);
    EXPECT_TRUE(creates(takes[0].ops, protocol::layout::cancel_request(one)));
    EXPECT_NE(
        std::find(
            takes[0].ops.begin(), takes[0].ops.end(),
            protocol::txn_op::remove(protocol::layout::cancel_marker("w1", one))
        ),
        takes[0].ops.end()
    );
}

// A marker that came while the bundle's T6 (or its worker's retry) was out is not in that
// multi: found alone in the departed worker's directory, it becomes the task's request again
// in the multi that deletes it (§6 T6), so that the task's cancel is not lost.
TEST_F(MasterFsm, AMarkerThatOutlivedItsBundleOnADepartedWorkerIsARequestAgain) {
    join("w1", 4);
    const auto bundle = protocol::bundle_id(tid(5, 1), 4);
    const auto one = protocol::bundled_task_id(bundle, 1);
    const auto two = protocol::bundled_task_id(bundle, 2);
    const auto plain = tid(5, 2);
    view.on(cancels_listed{{two}}, t0);  // its request is there already
    leave("w1");
    const auto step = view.on(
        departed_listed{
            "w1", std::vector<std::string>{one + ".cancel", two + ".cancel", plain + ".cancel"}},
        t0
    );
    const auto removes = of_kind(step, kind::remove_marker);
    ASSERT_EQ(removes.size(), 3U);
    std::vector<std::vector<protocol::txn_op>> ops;
    ops.reserve(removes.size());
    for (const auto& r : removes) {
        ops.push_back(r.ops);
    }
    // Delete and request again, one multi.
    const auto again = protocol::requeue_entry_cancels_ops("w1", {one}, {false}, 0);
    ASSERT_EQ(again.size(), 2U);
    const auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& o) {
        return o.size() == 2U && o[0] == again[0];
    });
    ASSERT_NE(it, ops.end());
    EXPECT_EQ((*it)[1].what, protocol::txn_op::kind::create);
    EXPECT_EQ((*it)[1].path, protocol::layout::cancel_request(one));
    // Its request there already: the delete alone; a plain task's marker: the delete alone.
    for (const auto& id : {two, plain}) {
        EXPECT_NE(
            std::find(
                ops.begin(), ops.end(),
                std::vector{protocol::txn_op::remove(protocol::layout::cancel_marker("w1", id))}
            ),
            ops.end()
        ) << id;
    }
    EXPECT_EQ(of_kind(step, kind::remove_departed).size(), 1U);
}

}  // namespace ZKD_UNITY_ID
