// SPDX-License-Identifier: MIT
// The master's decisions without ZooKeeper (roles/master/detail/master_fsm.hpp), through its one
// door: each call of on() is one event in, the step it returns the actions out; the answers to its
// transactions are fed back by hand. Time is a parameter: no test sleeps. Here: assignment,
// placement and the failed results the master writes; the other files by subject.
#include "unit/roles/master/master_fsm_fixture.hpp"

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace zkd::roles::fsm_test;

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
    // The node as read, stamped (its task never encoded again).
    EXPECT_EQ(
        assigns[0].ops, protocol::assign_ops(
                            0, high, "w1", task_data(), 1, 7,
                            protocol::decode_task_node(assigns[0].ops[2].data)->assigned.assigned_ms
                        )
                            .value()
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

TEST_F(MasterFsm, DirectoriesWaitingForAListingAreWokenOnlyWhenOneMayBeWanted) {
    // The session wakes the directories waiting for a listing (a thousand coroutines with a
    // thousand workers) only when worker_dir_listing_wanted() may say yes to one of them.
    join("w1", 2);
    join("w2", 2);
    EXPECT_FALSE(view.dir_listings_may_be_wanted());
    // A task not on its way to a worker yet: every directory may be wanted.
    const auto a = tid(5, 1);
    submit({a});
    EXPECT_TRUE(view.dir_listings_may_be_wanted());
    EXPECT_TRUE(view.dir_listings_may_be_wanted());  // for as long as that holds
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_FALSE(view.dir_listings_may_be_wanted());  // out: nobody's listing is in the way
    view.on(answered{assigns[0], committed(3)}, t0);
    EXPECT_FALSE(view.dir_listings_may_be_wanted());
    // A cancel request open: wanted while it is.
    view.on(cancels_listed{{tid(5, 9)}}, t0);
    EXPECT_TRUE(view.dir_listings_may_be_wanted());
    view.on(cancels_listed{{}}, t0);
    EXPECT_FALSE(view.dir_listings_may_be_wanted());
    // A worker that left: its directory's follower must hear it, once.
    std::erase(live, "w2");
    (void)workers_listed(live);
    EXPECT_TRUE(view.worker_dir_listing_wanted("w2"));
    EXPECT_TRUE(view.dir_listings_may_be_wanted());
    EXPECT_FALSE(view.dir_listings_may_be_wanted());
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

TEST_F(MasterFsm, AWorkersNodeAsItChangesIsWhatPlacementUsesNext) {
    join("w1", 1);
    join("w2", 1, {"other"});
    submit({tid(5, 1), tid(5, 2), tid(5, 3), tid(5, 4)});
    auto assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].worker, "w1");
    // More room, and w2 takes echo too: three more go, the emptier worker first.
    ASSERT_TRUE(worker_changed("w1", worker_data(3, {"echo"})));
    ASSERT_TRUE(worker_changed("w2", worker_data(1, {"echo", "other"})));
    assigns = of_kind(view.on(decide{}, t0), kind::assign);
    std::string order;
    for (const auto& a : assigns) {
        order += a.worker + " ";
    }
    EXPECT_EQ(order, "w1 w2 w1 ");
    // Unhealthy for echo: w1 gets none of it while it says so, then it does again.
    protocol::member_info sick = *protocol::decode_worker(worker_data(5, {"echo"}));
    sick.unhealthy = {"echo"};
    ASSERT_TRUE(worker_changed("w1", protocol::encode(sick)));
    submit({tid(5, 5)});
    EXPECT_TRUE(of_kind(view.on(decide{}, t0), kind::assign).empty());
    EXPECT_TRUE(of_kind(view.on(decide{}, t0 + std::chrono::seconds(60)), kind::reject).empty())
        << "served, though unhealthy: it waits";
    ASSERT_TRUE(worker_changed("w1", worker_data(5, {"echo"})));
    assigns = of_kind(view.on(decide{}, t0), kind::assign);
    ASSERT_EQ(assigns.size(), 1U);
    EXPECT_EQ(assigns[0].worker, "w1");
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

}  // namespace ZKD_UNITY_ID
