// SPDX-License-Identifier: MIT
// master_fsm (roles/master/detail/master_fsm.hpp), event by event: workers joining, leaving and
// stalling, T6 for the departed, and /master.
#include "unit/roles/master/master_fsm_fixture.hpp"

#include <boost/json/parse.hpp>

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::fsm_test;

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

TEST_F(MasterFsm, ASuspectGetsAFreshTaskAsItsProbeAndNothingElse) {
    join("w1", 8);
    join("w2", 2);
    // w1 left an assignment unstarted past the bound: two rounds list it; the second reads
    // it, takes it back and makes w1 suspect (named in /master).
    const auto old = tid(4, 9);
    const master_saw::stall_dirs_listed round{
        {"w1", "w2"}, {std::vector<std::string>{old}, std::nullopt}};
    EXPECT_TRUE(of_kind(view.on(round, t0), kind::read_assignments).empty());
    const auto reads = of_kind(view.on(round, t0), kind::read_assignments);
    ASSERT_EQ(reads.size(), 1U);
    EXPECT_EQ(reads[0].worker, "w1");
    EXPECT_EQ(reads[0].tids, std::vector<std::string>{old});
    EXPECT_EQ(reads[0].paths, std::vector<std::string>{protocol::layout::assignment("w1", old)});
    protocol::task_node unstarted = *protocol::decode_task_node(task_data());
    unstarted.assigned.assigned_ms = 1'000;
    const auto step = view.on(
        assignments_read{
            "w1",
            {assignment_node{old, assignment_node::status::ok, protocol::encode(unstarted), 0, 4}},
            1'000 + 10'000},
        t0
    );
    const auto takes = of_kind(step, kind::take_back);
    ASSERT_EQ(takes.size(), 1U);
    EXPECT_EQ(takes[0].tid, old);
    EXPECT_EQ(takes[0].kind, protocol::departed_kind::requeue);
    const auto writes = of_kind(step, kind::write_master);
    ASSERT_EQ(writes.size(), 1U);  // the suspects named
    EXPECT_EQ(stats.suspects, 1U);
    view.on(answered{takes[0], committed(takes[0].ops.size())}, t0);
    EXPECT_EQ(stats.taken_back, 1U);
    EXPECT_EQ(stats.requeued, 1U);
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
    // Its probe is out: nothing more for w1 (w2 is full).
    submit({tid(5, 5)});
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());
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

// /master names the features the master and every live worker follow (docs/protocol.md §2
// "Features"): a worker of an older zkd takes entry_results out while it is alive.
TEST_F(MasterFsm, MasterNamesOnlyTheFeaturesEveryLiveWorkerFollows) {
    const auto features_written = [](const master_step& step) {
        std::vector<std::vector<std::string>> out;
        for (const auto& w : of_kind(step, kind::write_master)) {
            EXPECT_EQ(w.ops.size(), 1U);
            // The fixture's master has no id, which decode_master would refuse: the field.
            std::vector<std::string> features;
            const auto doc = boost::json::parse(w.ops.at(0).data).as_object();
            if (const auto* f = doc.if_contains("features")) {
                for (const auto& name : f->as_array()) {
                    features.emplace_back(name.as_string());
                }
            }
            out.push_back(std::move(features));
        }
        return out;
    };
    const std::vector<std::string> none;
    const auto own = protocol::own_features();
    // A worker of this zkd: nothing to write (the master's node says so from its election).
    live = {"w1"};
    view.on(master_saw::workers_listed{live}, t0);
    auto step = view.on(workers_read{{worker_node{"w1", worker_data(1, {"echo"}), true}}}, t0);
    EXPECT_TRUE(features_written(step).empty());
    // An older worker (its node names no feature): entry_results no longer holds.
    protocol::member_info old;
    old.id = "w2";
    old.host = "h";
    old.capacity = 1;
    old.types = {"echo"};
    live = {"w1", "w2"};
    view.on(master_saw::workers_listed{live}, t0);
    step = view.on(workers_read{{worker_node{"w2", protocol::encode(old), true}}}, t0);
    EXPECT_EQ(features_written(step), std::vector<std::vector<std::string>>{none});
    // It says it follows something else: still not entry_results (nothing new to write).
    old.features = {"something_newer"};
    step = view.on(master_saw::worker_changed{"w2", protocol::encode(old)}, t0);
    EXPECT_TRUE(features_written(step).empty());
    // Upgraded in place (its node rewritten): the master's own features again.
    old.features = own;
    old.features.push_back("something_newer");
    step = view.on(master_saw::worker_changed{"w2", protocol::encode(old)}, t0);
    EXPECT_EQ(features_written(step), std::vector<std::vector<std::string>>{own});
    // Another old one joins, then leaves: out, then back.
    live = {"w1", "w2", "w3"};
    view.on(master_saw::workers_listed{live}, t0);
    old.id = "w3";
    old.features.clear();
    step = view.on(workers_read{{worker_node{"w3", protocol::encode(old), true}}}, t0);
    EXPECT_EQ(features_written(step), std::vector<std::vector<std::string>>{none});
    live = {"w1", "w2"};
    step = view.on(master_saw::workers_listed{live}, t0);
    EXPECT_EQ(features_written(step), std::vector<std::vector<std::string>>{own});
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
    expected.features = protocol::own_features();  // the fixture's master and workers
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
    // Replaced while that write is out: one write at a time; what was read is looked at
    // again once the write is answered.
    EXPECT_TRUE(
        of_kind(view.on(master_node_read{true, false, {}, 3}, t0), kind::write_master).empty()
    );
    writes = of_kind(view.on(master_node_written{}, t0), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_EQ(writes[0].ops, protocol::master_node_ops(master_node(), true, 3));
    EXPECT_TRUE(of_kind(view.on(master_node_written{}, t0), kind::write_master).empty());
    // Our own node, saying what it should: left alone.
    EXPECT_TRUE(
        of_kind(view.on(master_node_read{true, true, data, 0}, t0), kind::write_master).empty()
    );
    // Our own node, its data set by someone else: written again at the version read.
    writes = of_kind(view.on(master_node_read{true, true, "{}", 1}, t0), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_EQ(writes[0].ops, protocol::master_node_ops(master_node(), true, 1));
}

// Its data set (a rewrite goes out), then the node deleted before that write is answered:
// the delete fires no watch after it, so the read that saw it is what has it created again.
TEST(MasterFsmNode, ADeleteSeenWhileARewriteIsOutIsWrittenOnceItIsAnswered) {
    master_stats stats;
    master_fsm::options opts;
    opts.master_node = master_node();
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    auto writes = of_kind(view.on(master_node_read{true, true, "{}", 4}, t0), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_EQ(writes[0].ops, protocol::master_node_ops(master_node(), true, 4));
    EXPECT_TRUE(
        of_kind(view.on(master_node_read{false, false, {}, -1}, t0), kind::write_master).empty()
    );
    writes = of_kind(view.on(master_node_written{}, t0), kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    EXPECT_TRUE(writes[0].again);
    EXPECT_EQ(writes[0].ops, protocol::master_node_ops(master_node(), false, -1));
    // Answered, with no read meanwhile: nothing more.
    EXPECT_TRUE(of_kind(view.on(master_node_written{}, t0), kind::write_master).empty());
}

TEST(MasterFsmNode, WithNoSuspectsNothingIsWritten) {
    master_stats stats;
    master_fsm::options opts;
    opts.master_node = master_node();
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    // A round with no live worker: nobody is suspect, which /master says already.
    EXPECT_TRUE(of_kind(view.on(stall_dirs_listed{}, t0), kind::write_master).empty());
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

// A new master's node names no feature (its election writes none) until it has read every
// worker it listed: a worker of an older zkd not read yet is never taken for one of ours.
TEST(MasterFsmNode, FeaturesAreNamedOnceEveryListedWorkerWasRead) {
    master_stats stats;
    master_fsm::options opts;
    opts.master_node = master_node();
    master_fsm view(protocol::layout{}, 7, opts, stats);
    const auto t0 = clock_type::time_point{} + std::chrono::hours(1);
    auto step = view.on(master_saw::workers_listed{{"w1"}}, t0);
    EXPECT_TRUE(of_kind(step, kind::write_master).empty());  // w1 is being read
    step = view.on(workers_read{{worker_node{"w1", worker_data(1, {"echo"}), true}}}, t0);
    const auto writes = of_kind(step, kind::write_master);
    ASSERT_EQ(writes.size(), 1U);
    const auto doc = boost::json::parse(writes[0].ops.at(0).data).as_object();
    ASSERT_TRUE(doc.contains("features"));
    EXPECT_EQ(doc.at("features").as_array(), boost::json::array{"entry_results"});
}

}  // namespace ZKD_UNITY_ID
