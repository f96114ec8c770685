// SPDX-License-Identifier: MIT
// The client's decisions without ZooKeeper (roles/client/submit_fsm.hpp): a submit's answers and a
// bundle consume's answers fed by hand, lost ones and cancellations included.
#include "roles/client/submit_fsm.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using protocol::op_code;
using protocol::txn_answer;
using protocol::txn_op;
using next = submit_fsm::next;
using outcome = submit_fsm::outcome;
using kind = bundle_consume::step::kind;
using end = bundle_consume::step::end;

namespace {

const std::string a = "t4-1763733600123-3fa9c2d1000001";
const std::string b = "t4-1763733600123-3fa9c2d1000002";

protocol::layout test_layout() {
    protocol::layout l;
    l.pending_shards = 4;
    l.result_shards = 4;
    return l;
}

const txn_answer committed{false, {op_code::ok}};
const txn_answer lost{true, {}};

txn_answer failed(op_code c) {
    return {true, {c}};
}

submit_fsm two(bool receipts) {
    return submit_fsm(test_layout(), {a, b}, {"A", "B"}, receipts);
}

std::string bundle_data(std::vector<std::size_t> consumed) {
    protocol::task_result r;
    r.task = "bundle";
    r.state = protocol::task_state::succeeded;
    r.value = 1;
    r.consumed = std::move(consumed);
    return protocol::encode(r);
}

}  // namespace

TEST(SubmitFsm, EachNodeIsOneCreateOfItsOwn) {
    const auto p = two(true);
    const auto l = test_layout();
    ASSERT_EQ(p.size(), 2U);
    EXPECT_EQ(p.ops(0), std::vector<txn_op>{txn_op::create(l.pending_task(a), "A")});
    EXPECT_EQ(p.ops(1), std::vector<txn_op>{txn_op::create(l.pending_task(b), "B")});
}

TEST(SubmitFsm, SubmittedOnceEveryNodeIsThere) {
    auto p = two(true);
    EXPECT_EQ(p.result(), outcome::pending);
    EXPECT_EQ(p.answered(1, committed, false, true), next::wait);
    EXPECT_EQ(p.result(), outcome::pending);
    EXPECT_EQ(p.answered(0, committed, false, true), next::over);
    EXPECT_EQ(p.result(), outcome::submitted);
}

TEST(SubmitFsm, AFailedNodeFailsTheCallButTheOthersStillCount) {
    auto p = two(true);
    EXPECT_EQ(p.answered(1, failed(op_code::other), false, true), next::wait);
    EXPECT_EQ(p.answered(0, committed, false, true), next::over);
    EXPECT_EQ(p.result(), outcome::failed);
    EXPECT_EQ(p.first_failed(), 1U);
    // Which nodes failed (an automatic bundle's tasks belong to several calls: each call is
    // told of its own nodes).
    EXPECT_TRUE(p.failed(1));
    EXPECT_FALSE(p.failed(0));
    EXPECT_FALSE(two(true).failed(0));
}

TEST(SubmitFsm, WithoutReceiptsALostCreateIsSentAgainAndFoundThere) {
    auto p = two(false);
    EXPECT_EQ(p.answered(0, lost, true, true), next::resend);
    EXPECT_EQ(p.answered(0, failed(op_code::node_exists), false, true), next::wait);
    EXPECT_EQ(p.answered(1, committed, false, true), next::over);
    EXPECT_EQ(p.result(), outcome::submitted);
}

TEST(SubmitFsm, WithReceiptsALostAnswerIsTheBatchersToDecide) {
    // With receipts the batcher completes a group with an unknown outcome only once the
    // session is gone: that is a failure, never a resend (which could create a task twice).
    auto p = two(true);
    EXPECT_EQ(p.answered(0, lost, true, true), next::wait);
    EXPECT_EQ(p.answered(1, committed, false, true), next::over);
    EXPECT_EQ(p.result(), outcome::failed);
    EXPECT_EQ(p.first_failed(), 0U);
}

TEST(SubmitFsm, ALostAnswerIsNotSentAgainOnceTheSessionIsGoneOrTheBatcherAborted) {
    auto p = two(false);
    EXPECT_EQ(p.answered(0, lost, true, false), next::wait);  // session gone
    EXPECT_EQ(p.answered(1, lost, false, true), next::over);  // batcher gone
    EXPECT_EQ(p.result(), outcome::failed);
}

TEST(SubmitFsm, ACancelledSubmitWithAnswersOutIsNoSuccess) {
    auto p = two(true);
    EXPECT_EQ(p.answered(0, committed, false, true), next::wait);
    p.cancelled();
    EXPECT_EQ(p.result(), outcome::cancelled);
    // A late answer does not turn it into a success for the caller, who is gone; but the
    // plan stays consistent for the handlers that still run.
    EXPECT_EQ(p.answered(1, committed, false, true), next::over);
}

TEST(SubmitFsm, ACancelSeenAfterEveryAnswerLeavesTheAnswersToSpeak) {
    auto p = two(true);
    p.answered(0, committed, false, true);
    p.answered(1, committed, false, true);
    p.cancelled();
    EXPECT_EQ(p.result(), outcome::submitted);
}

// --- direct placement (§6 T1 "Direct placement") ----------------------------------------------

TEST(SubmitFsm, ADirectNodeGoesToItsWorkerAndToPendingOnceRedirected) {
    auto p = two(true);
    const auto l = test_layout();
    p.direct(0, "w-1", 3, "A+");
    EXPECT_EQ(p.direct_worker(0), "w-1");
    EXPECT_EQ(p.direct_worker(1), "");
    EXPECT_EQ(p.ops(0), protocol::direct_submit_ops("w-1", 3, a, "A+"));
    EXPECT_EQ(p.ops(1), std::vector<txn_op>{txn_op::create(l.pending_task(b), "B")});
    // The worker's node changed (it drains): the node goes to pending, as data without the
    // assignment.
    EXPECT_EQ(
        p.answered(0, {true, {op_code::bad_version, op_code::not_run}}, false, true), next::resend
    );
    EXPECT_EQ(p.direct_worker(0), "");
    EXPECT_EQ(p.ops(0), std::vector<txn_op>{txn_op::create(l.pending_task(a), "A")});
    EXPECT_EQ(p.result(), outcome::pending);
    EXPECT_EQ(p.answered(0, committed, false, true), next::wait);
    EXPECT_EQ(p.answered(1, committed, false, true), next::over);
    EXPECT_EQ(p.result(), outcome::submitted);
}

TEST(SubmitFsm, ADirectNodeFoundThereOrFailedCountsAsAnyOther) {
    auto p = two(false);
    p.direct(0, "w-1", 0, "A+");
    p.direct(1, "w-2", 0, "B+");
    EXPECT_EQ(p.answered(0, lost, true, true), next::resend);  // no receipts: sent again
    EXPECT_EQ(p.direct_worker(0), "w-1");                      // to the same worker
    EXPECT_EQ(p.answered(0, {true, {op_code::ok, op_code::node_exists}}, false, true), next::wait);
    EXPECT_EQ(p.answered(1, {true, {op_code::ok, op_code::other}}, false, true), next::over);
    EXPECT_EQ(p.result(), outcome::failed);
    EXPECT_EQ(p.first_failed(), 1U);
}

namespace {

worker_seen seen(const std::string& id, int capacity, int held, std::vector<std::string> types) {
    worker_seen w;
    w.id = id;
    w.version = 2;
    w.info.id = id;
    w.info.capacity = capacity;
    w.info.types = std::move(types);
    w.held = held;
    return w;
}

}  // namespace

TEST(DirectPlacer, NothingGoesDirectlyBeforeAReadOrWithoutRoom) {
    direct_placer d;
    EXPECT_FALSE(d.place("echo", 0));
    d.read({seen("w-0", 2, 1, {"echo"}), seen("w-1", 3, 3, {"echo"})});
    EXPECT_EQ(d.budget("w-0"), 1);
    EXPECT_EQ(d.budget("w-1"), 0);
    const auto t = d.place("echo", 1);  // w-1's turn, but it is full
    ASSERT_TRUE(t);
    EXPECT_EQ(t->worker, "w-0");
    EXPECT_EQ(t->version, 2);
    d.placed("t1", t->worker);
    EXPECT_FALSE(d.place("echo", 0));
}

TEST(DirectPlacer, OnlyAWorkerThatServesTheTypeAndIsNotDraining) {
    direct_placer d;
    auto draining = seen("w-2", 8, 0, {"echo", "sleep"});
    draining.info.draining = true;
    d.read({seen("w-0", 8, 0, {"echo"}), seen("w-1", 8, 0, {"sleep", "spin"}), draining});
    for (std::uint64_t turn = 0; turn < 6; ++turn) {
        const auto t = d.place("sleep", turn);
        ASSERT_TRUE(t);
        EXPECT_EQ(t->worker, "w-1");
    }
    EXPECT_FALSE(d.place("md5", 0));
}

TEST(DirectPlacer, AWorkerWhereTheTypeIsUnhealthyGetsNoneOfIt) {
    direct_placer d;
    auto sick = seen("w-0", 8, 0, {"echo", "embed"});
    sick.info.unhealthy = {"embed"};
    d.read({sick, seen("w-1", 1, 0, {"embed"})});
    for (std::uint64_t turn = 0; turn < 4; ++turn) {
        const auto t = d.place("echo", turn);
        ASSERT_TRUE(t);
        EXPECT_EQ(t->worker, "w-0");  // its other types as usual
    }
    const auto t = d.place("embed", 0);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->worker, "w-1");
    EXPECT_FALSE(d.place("embed", 0)) << "w-1 is full: pending, never w-0";
}

TEST(DirectPlacer, ASuspectTheMasterNamesGetsNothing) {
    direct_placer d;
    d.read({seen("w-0", 8, 0, {"echo"}), seen("w-1", 8, 0, {"echo"})}, {"w-1"});
    EXPECT_EQ(d.budget("w-1"), 0);
    for (std::uint64_t turn = 0; turn < 6; ++turn) {
        const auto t = d.place("echo", turn);
        ASSERT_TRUE(t);
        EXPECT_EQ(t->worker, "w-0");
    }
    d.read({seen("w-1", 8, 0, {"echo"})}, {"w-1"});
    EXPECT_FALSE(d.place("echo", 0)) << "only a suspect left: the task goes to pending";
}

TEST(DirectPlacer, EachTurnHasItsWorkerWhileItHasRoom) {
    direct_placer d;
    d.read({seen("w-0", 8, 0, {"echo"}), seen("w-1", 8, 0, {"echo"}), seen("w-2", 8, 6, {"echo"})});
    EXPECT_EQ(d.place("echo", 4)->worker, "w-1");
    EXPECT_EQ(d.place("echo", 4)->worker, "w-1");  // the same transaction: the same worker
    EXPECT_EQ(d.place("echo", 5)->worker, "w-2");
    EXPECT_EQ(d.place("echo", 5)->worker, "w-2");
    // w-2 is full: the one with the most room.
    EXPECT_EQ(d.place("echo", 5)->worker, "w-0");
}

TEST(DirectPlacer, APreferredWorkerGoesFirstWhileItTakesTheTask) {
    direct_placer d;
    auto draining = seen("w-3", 8, 0, {"echo"});
    draining.info.draining = true;
    d.read(
        {seen("w-0", 8, 0, {"echo"}), seen("w-1", 2, 0, {"echo"}), seen("w-2", 8, 0, {"sleep"}),
         draining}
    );
    EXPECT_EQ(d.place("echo", 0, "w-1")->worker, "w-1") << "before the turn's worker";
    EXPECT_EQ(d.place("echo", 0, "w-1")->worker, "w-1");
    // Full now: the turn's worker, as without a preference.
    EXPECT_EQ(d.place("echo", 0, "w-1")->worker, "w-0");
    // One that does not serve the type, one draining, one not in the view: the turn's.
    EXPECT_EQ(d.place("echo", 0, "w-2")->worker, "w-0");
    EXPECT_EQ(d.place("echo", 0, "w-3")->worker, "w-0");
    EXPECT_EQ(d.place("echo", 0, "w-9")->worker, "w-0");
    EXPECT_EQ(d.place("sleep", 0, "w-2")->worker, "w-2");
    // A suspect is never preferred.
    direct_placer s;
    s.read({seen("w-0", 8, 0, {"echo"}), seen("w-1", 8, 0, {"echo"})}, {"w-1"});
    EXPECT_EQ(s.place("echo", 1, "w-1")->worker, "w-0");
}

TEST(DirectPlacer, AResultGivesTheSlotBackAndAReadCountsWhatTheWorkerHolds) {
    direct_placer d;
    d.read({seen("w-0", 2, 0, {"echo"})});
    d.placed("t1", d.place("echo", 0)->worker);
    d.placed("t2", d.place("echo", 0)->worker);
    EXPECT_EQ(d.budget("w-0"), 0);
    d.settled("t1");
    EXPECT_EQ(d.budget("w-0"), 1);
    d.settled("t1");  // once
    d.settled("t9");  // not ours
    EXPECT_EQ(d.budget("w-0"), 1);
    // t2 is out still, its submit maybe not committed when the worker was read: the read's
    // count or ours, whichever is more.
    d.read({seen("w-0", 2, 0, {"echo"})});
    EXPECT_EQ(d.budget("w-0"), 1);
    d.read({seen("w-0", 2, 2, {"echo"})});
    EXPECT_EQ(d.budget("w-0"), 0);
    // Placed two reads ago: in the worker's count by now, or finished; forgotten, so a
    // client that never waits keeps nothing of it.
    d.read({seen("w-0", 2, 0, {"echo"})});
    EXPECT_EQ(d.budget("w-0"), 2);
    d.settled("t2");
    EXPECT_EQ(d.budget("w-0"), 2);
}

TEST(DirectPlacer, ALargeClusterIsReadAWindowOfWorkersAtATime) {
    std::size_t at = 0;
    EXPECT_EQ(worker_window({"b", "a"}, at, 3), (std::vector<std::string>{"b", "a"}));
    EXPECT_EQ(at, 0U);
    const std::vector<std::string> five{"e", "c", "a", "d", "b"};
    EXPECT_EQ(worker_window(five, at, 2), (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(worker_window(five, at, 2), (std::vector<std::string>{"c", "d"}));
    EXPECT_EQ(worker_window(five, at, 2), (std::vector<std::string>{"e", "a"}));  // wraps
    EXPECT_EQ(at, 1U);
}

TEST(BundleConsume, MarksItsTasksAtTheVersionReadAndDelivers) {
    bundle_consume c("/results/r1/b", 3, {1});
    auto s = c.read(bundle_data({0}), 4);
    ASSERT_EQ(s.what, kind::write);
    ASSERT_EQ(s.ops.size(), 1U);
    EXPECT_EQ(s.ops[0].what, txn_op::kind::set);
    EXPECT_EQ(s.ops[0].version, 4);
    s = c.answered(committed, false);
    ASSERT_EQ(s.what, kind::done);
    EXPECT_EQ(s.how, end::delivered);
    EXPECT_TRUE(c.taken().empty());
    EXPECT_EQ(c.result().consumed, (std::vector<std::size_t>{0}));  // as read
}

TEST(BundleConsume, AConflictReadsAgainAndTasksConsumedMeanwhileAreTaken) {
    bundle_consume c("/results/r1/b", 3, {1, 2});
    auto s = c.read(bundle_data({}), 1);
    s = c.answered(failed(op_code::bad_version), false);
    ASSERT_EQ(s.what, kind::reread);
    s = c.reread(bundle_data({2}), 2);  // someone consumed task 2
    ASSERT_EQ(s.what, kind::write);
    EXPECT_EQ(s.ops[0].version, 2);
    s = c.answered(committed, false);
    EXPECT_EQ(s.how, end::delivered);
    EXPECT_EQ(c.taken(), std::vector<std::size_t>{2});
}

TEST(BundleConsume, ALostAnswerWhoseSetAppliedIsNotWrittenAgain) {
    bundle_consume c("/results/r1/b", 3, {1});
    auto s = c.read(bundle_data({0}), 4);
    s = c.answered(lost, true);
    ASSERT_EQ(s.what, kind::reconnect);
    s = c.reconnected(true);
    ASSERT_EQ(s.what, kind::reread);
    // One version on, holding what we wrote: ours applied.
    s = c.reread(bundle_data({0, 1}), 5);
    ASSERT_EQ(s.what, kind::done);
    EXPECT_EQ(s.how, end::delivered);
    EXPECT_TRUE(c.taken().empty());
}

TEST(BundleConsume, ALostAnswerWhoseSetDidNotApplyWritesAgain) {
    bundle_consume c("/results/r1/b", 3, {1});
    auto s = c.read(bundle_data({0}), 4);
    s = c.answered(lost, true);
    s = c.reconnected(true);
    s = c.reread(bundle_data({0}), 4);
    ASSERT_EQ(s.what, kind::write);
    EXPECT_EQ(s.ops[0].version, 4);
}

TEST(BundleConsume, AGoneNodeMeansOthersTookOursUnlessOurLostDeleteDidIt) {
    bundle_consume mine("/results/r1/b", 2, {1});
    auto s = mine.read(bundle_data({0}), 4);
    EXPECT_EQ(s.ops[0], txn_op::remove("/results/r1/b", 4));  // the last one deletes
    s = mine.answered(lost, true);
    s = mine.reconnected(true);
    s = mine.reread_gone();
    EXPECT_EQ(s.how, end::delivered);
    EXPECT_TRUE(mine.taken().empty());  // our delete applied: ours to deliver

    bundle_consume theirs("/results/r1/b", 2, {1});
    s = theirs.read(bundle_data({0}), 4);
    s = theirs.answered(failed(op_code::no_node), false);
    ASSERT_EQ(s.what, kind::reread);
    s = theirs.reread_gone();
    EXPECT_EQ(s.how, end::delivered);
    EXPECT_EQ(theirs.taken(), std::vector<std::size_t>{1});
}

// What the client's results directory follower must count as its own change: a committed
// delete of the bundle's node, not a set, not a delete whose answer was lost.
TEST(BundleConsume, OnlyACommittedDeleteIsOurs) {
    bundle_consume last("/results/r1/b", 2, {1});
    (void)last.read(bundle_data({0}), 4);
    EXPECT_FALSE(last.deleted());
    (void)last.answered(committed, false);
    EXPECT_TRUE(last.deleted());

    bundle_consume marks("/results/r1/b", 3, {1});
    (void)marks.read(bundle_data({0}), 4);
    (void)marks.answered(committed, false);
    EXPECT_FALSE(marks.deleted());  // a set: the node stays

    bundle_consume lost_delete("/results/r1/b", 2, {1});
    (void)lost_delete.read(bundle_data({0}), 4);
    (void)lost_delete.answered(lost, true);
    (void)lost_delete.reconnected(true);
    (void)lost_delete.reread_gone();
    EXPECT_FALSE(lost_delete.deleted());  // maybe ours, maybe not: the follower lists
}

TEST(BundleConsume, APublishedTaskIsLeftToItsOwnNodeAndTheRestDeletesTheResult) {
    protocol::task_result r;
    r.task = "bundle";
    r.value = 1;
    r.published = {0};
    // Task 0 is in its own node: nothing to write for it.
    bundle_consume only_published("/results/r1/b", 2, {0});
    auto s = only_published.read(protocol::encode(r), 3);
    ASSERT_EQ(s.what, kind::done);
    EXPECT_EQ(s.how, end::delivered);
    EXPECT_FALSE(only_published.deleted());
    // Task 1 is the last not published: its consume deletes the bundle's result.
    bundle_consume last("/results/r1/b", 2, {1});
    s = last.read(protocol::encode(r), 3);
    ASSERT_EQ(s.what, kind::write);
    ASSERT_EQ(s.ops.size(), 1U);
    EXPECT_EQ(s.ops[0], txn_op::remove("/results/r1/b", 3));
    (void)last.answered(committed, false);
    EXPECT_TRUE(last.deleted());
}

TEST(BundleConsume, GarbageSessionLossAndHardErrors) {
    bundle_consume c("/results/r1/b", 3, {1});
    EXPECT_EQ(c.read("not json", 1).how, end::garbage);

    bundle_consume gone("/results/r1/b", 3, {1});
    gone.read(bundle_data({}), 1);
    gone.answered(lost, true);
    const auto s = gone.reconnected(false);  // the session ended: deliver what was read
    EXPECT_EQ(s.what, kind::done);
    EXPECT_EQ(s.how, end::delivered);

    bundle_consume denied("/results/r1/b", 3, {1});
    denied.read(bundle_data({}), 1);
    EXPECT_EQ(denied.answered(failed(op_code::other), false).how, end::failed);
    bundle_consume aborted("/results/r1/b", 3, {1});
    aborted.read(bundle_data({}), 1);
    EXPECT_EQ(aborted.answered(lost, false).how, end::failed);  // the client going away
}

namespace {

protocol::task_result bundle_of(std::size_t n) {
    protocol::task_result r;
    r.task = "bundle";
    r.state = protocol::task_state::succeeded;
    for (std::size_t i = 0; i < n; ++i) {
        protocol::task_result e;
        e.state = protocol::task_state::succeeded;
        e.value = static_cast<int>(i);
        r.bundle.push_back(e);
    }
    return r;
}

using wake = shared_bundle_read::on_wake;
using got = shared_bundle_read::outcome::kind;

}  // namespace

TEST(SharedBundleRead, TheReaderConsumesForEveryWaitThatJoinedAndEachGetsItsEntry) {
    shared_bundle_read r(0);
    r.join(2);
    r.join(2);  // two waits of ours on one task
    EXPECT_EQ(r.indices(), (std::vector<std::size_t>{0, 2, 2}));
    r.consuming();
    EXPECT_EQ(r.woke(2), wake::wait_more);  // woken by a cancel while its task is consumed
    r.consumed(bundle_of(3), {});
    EXPECT_EQ(r.woke(2), wake::deliver);
    const auto two = r.outcome_for(2, "b.2");
    ASSERT_EQ(two.what, got::result);
    EXPECT_EQ(two.result.value, boost::json::value(2));
    EXPECT_EQ(two.result.task, "b.2");
}

TEST(SharedBundleRead, ACancelledJoinedWaitLeavesTheReadOnce) {
    shared_bundle_read r(0);
    r.join(1);
    r.join(1);
    EXPECT_EQ(r.woke(1), wake::cancelled);
    EXPECT_EQ(r.indices(), (std::vector<std::size_t>{0, 1}));  // the other wait on 1 stays
}

TEST(SharedBundleRead, TasksConsumedByOthersFirstAndAGoneNodeAreGone) {
    shared_bundle_read r(0);
    r.join(1);
    r.consuming();
    r.consumed(bundle_of(2), {1});
    EXPECT_EQ(r.outcome_for(0, "b.0").what, got::result);
    EXPECT_EQ(r.outcome_for(1, "b.1").what, got::gone);

    shared_bundle_read before(0);
    before.gone();
    EXPECT_EQ(before.woke(0), wake::deliver);
    EXPECT_EQ(before.outcome_for(0, "b.0").what, got::gone);
}

TEST(SharedBundleRead, APublishedTaskIsToBeReadFromItsOwnNode) {
    shared_bundle_read r(0);
    r.join(1);
    r.consuming();
    auto whole = bundle_of(2);
    whole.published = {1};
    r.consumed(whole, {});
    EXPECT_EQ(r.outcome_for(0, "b.0").what, got::result);
    EXPECT_EQ(r.outcome_for(1, "b.1").what, got::published);
}

TEST(SharedBundleRead, AReaderThatFailsLeavesTheOthersToReadForThemselves) {
    shared_bundle_read waiting(0);
    waiting.join(1);
    EXPECT_TRUE(waiting.abandon());
    EXPECT_EQ(waiting.woke(1), wake::read_again);

    shared_bundle_read finished(0);
    finished.consuming();
    finished.failed();
    EXPECT_FALSE(finished.abandon());  // over already: nobody to wake again
    EXPECT_EQ(finished.outcome_for(0, "b.0").what, got::failed);

    shared_bundle_read short_one(0);
    short_one.join(5);
    short_one.consuming();
    short_one.consumed(bundle_of(2), {});
    EXPECT_EQ(short_one.outcome_for(5, "b.5").what, got::garbage);  // no such entry
}

// --- the results directory (results_inbox) ----------------------------------------------------

namespace {

std::string log_of(std::vector<protocol::log_entry> entries) {
    return protocol::encode(protocol::change_log{std::move(entries)});
}

protocol::dir_stat at(std::int32_t version, std::int32_t cversion) {
    return protocol::dir_stat{7, version, cversion};
}

}  // namespace

TEST(RolesResultsInbox, TheFirstReadListsThenEachLogDeliversItsResultsWithTheirData) {
    results_inbox in;
    EXPECT_FALSE(in.wait(a));
    EXPECT_EQ(in.waiting(), 1U);
    // Not following yet: list, and take the data the log carried for what the listing found.
    EXPECT_FALSE(in.log_read(at(1, 1), log_of({{a, "ra"}})));
    auto first = in.listed({a}, at(1, 1));
    ASSERT_EQ(first.with_data.size(), 1U);
    EXPECT_EQ(first.with_data[0], std::pair(a, std::string("ra")));
    EXPECT_EQ(in.waiting(), 0U);
    // Our consume of a, then b's result: the log accounts for both changes.
    EXPECT_FALSE(in.wait(b));
    in.removed(a);
    auto second = in.log_read(at(2, 3), log_of({{b, "rb"}}));
    ASSERT_TRUE(second);
    ASSERT_EQ(second->with_data.size(), 1U);
    EXPECT_EQ(second->with_data[0].first, b);
    EXPECT_TRUE(second->to_read.empty());
    // Nothing new but our own delete: nothing to deliver, nothing to list.
    in.removed(b);
    auto quiet = in.log_read(at(2, 4), log_of({{b, "rb"}}));
    ASSERT_TRUE(quiet);
    EXPECT_TRUE(quiet->empty());
    EXPECT_EQ(in.listings(), 1U);  // the first one only
}

TEST(RolesResultsInbox, AResultTheLogNamesWithoutDataIsReadAndOneNobodyWaitsForIsKept) {
    results_inbox in;
    EXPECT_FALSE(in.log_read(at(0, 0), ""));
    EXPECT_TRUE(in.listed({}, at(0, 0)).empty());
    EXPECT_FALSE(in.wait(a));
    auto d = in.log_read(at(1, 2), log_of({{a, std::nullopt}, {b, "rb"}}));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->to_read, std::vector<std::string>{a});  // over the log's budget: by name
    EXPECT_TRUE(d->with_data.empty()) << "b: nobody waits for it";
    // A wait that comes later finds b there: its caller reads it.
    EXPECT_TRUE(in.wait(b));
    EXPECT_EQ(in.waiting(), 0U);
}

TEST(RolesResultsInbox, AChangeTheLogDoesNotAccountForMakesItList) {
    results_inbox in;
    EXPECT_FALSE(in.log_read(at(0, 0), ""));
    (void)in.listed({}, at(0, 0));
    EXPECT_FALSE(in.wait(a));
    EXPECT_FALSE(in.wait(b));
    // Two writers' transactions between our reads: the version moved by two.
    EXPECT_FALSE(in.log_read(at(2, 2), log_of({{b, "rb"}})));
    auto listed = in.listed({a, b}, at(2, 2));
    EXPECT_EQ(listed.to_read, std::vector<std::string>{a});
    ASSERT_EQ(listed.with_data.size(), 1U);
    EXPECT_EQ(listed.with_data[0].first, b);
    // Someone else deleted a child (another client consumed): list, whatever the log says.
    EXPECT_FALSE(in.log_read(at(3, 4), log_of({{"t4-x", "r"}})));
    (void)in.listed({a, b, "t4-x"}, at(3, 4));
    // Garbage in the directory's data: list.
    EXPECT_FALSE(in.log_read(at(4, 4), "garbage"));
}

TEST(RolesResultsInbox, ACancelledWaitIsNotDeliveredAndAGoneDirectoryIsListedAgain) {
    results_inbox in;
    EXPECT_FALSE(in.log_read(at(0, 0), ""));
    (void)in.listed({}, at(0, 0));
    EXPECT_FALSE(in.wait(a));
    EXPECT_FALSE(in.wait(a));  // two waits on one task: both delivered together
    EXPECT_EQ(in.waiting(), 2U);
    in.unwait(a);
    EXPECT_EQ(in.waiting(), 1U);
    in.unwait(a);
    EXPECT_EQ(in.waiting(), 0U);
    auto d = in.log_read(at(1, 1), log_of({{a, "ra"}}));
    ASSERT_TRUE(d);
    EXPECT_TRUE(d->empty()) << "nobody waits any more";
    in.gone();
    EXPECT_FALSE(in.following());
    EXPECT_FALSE(in.wait(a)) << "after gone(), what was there is not known";
    EXPECT_FALSE(in.log_read(at(1, 1), log_of({{a, "ra"}})));
}

TEST(RolesResultsInbox, ABundlesResultWaitedForByNameOnlyIsNeitherCopiedNorRead) {
    // The waits on the tasks of one bundle each wait for the task's own node (its data) or
    // the bundle's result (its name only): 1,000 waits on the bundle's name get it named,
    // once, whether the log carried its data or not; they then share one read of it.
    const std::string bundle = "t4-1763733600123-3fa9c2d1000003_1000";
    results_inbox in;
    EXPECT_FALSE(in.log_read(at(0, 0), ""));
    (void)in.listed({}, at(0, 0));
    for (int k = 0; k < 1000; ++k) {
        EXPECT_FALSE(in.wait(bundle, true));
    }
    EXPECT_FALSE(in.wait(a));  // a wait on a result of its own, with its data
    EXPECT_EQ(in.waiting(), 1001U);
    auto d = in.log_read(at(1, 2), log_of({{bundle, "whole"}, {a, "ra"}}));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->named, std::vector<std::string>{bundle});
    ASSERT_EQ(d->with_data.size(), 1U) << "the bundle's data is not delivered";
    EXPECT_EQ(d->with_data[0].first, a);
    EXPECT_TRUE(d->to_read.empty());
    EXPECT_EQ(in.waiting(), 0U);

    // Over the log's budget (no data in it): named still, nothing to read.
    const std::string big = "t4-1763733600123-3fa9c2d1000004_1000";
    for (int k = 0; k < 1000; ++k) {
        EXPECT_FALSE(in.wait(big, true));
    }
    auto by_name = in.log_read(at(2, 3), log_of({{big, std::nullopt}}));
    ASSERT_TRUE(by_name);
    EXPECT_EQ(by_name->named, std::vector<std::string>{big});
    EXPECT_TRUE(by_name->to_read.empty());
    EXPECT_TRUE(by_name->with_data.empty());

    // Found by a listing, with the data of the log read that failed: named too.
    const std::string listed = "t4-1763733600123-3fa9c2d1000005_1000";
    EXPECT_FALSE(in.wait(listed, true));
    EXPECT_FALSE(in.log_read(at(4, 5), log_of({{listed, "whole"}})));
    auto found = in.listed({bundle, big, listed}, at(4, 5));
    EXPECT_EQ(found.named, std::vector<std::string>{listed});
    EXPECT_TRUE(found.with_data.empty());
    EXPECT_TRUE(found.to_read.empty());

    // There already: the wait is told so (not delivered), whichever way it waits.
    EXPECT_TRUE(in.wait(big, true));
    EXPECT_EQ(in.waiting(), 0U);
}

TEST(RolesResultsInbox, ANameAlsoWaitedForWithItsDataComesWithItsData) {
    results_inbox in;
    EXPECT_FALSE(in.log_read(at(0, 0), ""));
    (void)in.listed({}, at(0, 0));
    EXPECT_FALSE(in.wait(b, true));
    EXPECT_FALSE(in.wait(b));
    EXPECT_FALSE(in.wait(a));
    EXPECT_FALSE(in.wait(a, true));
    in.unwait(a);  // the wait that wanted a's data left: a is named only
    auto d = in.log_read(at(1, 2), log_of({{a, "ra"}, {b, std::nullopt}}));
    ASSERT_TRUE(d);
    EXPECT_EQ(d->to_read, std::vector<std::string>{b});  // delivered once, for both waits
    EXPECT_EQ(d->named, std::vector<std::string>{a});
    EXPECT_TRUE(d->with_data.empty());
    EXPECT_EQ(in.waiting(), 0U);
}

}  // namespace ZKD_UNITY_ID
