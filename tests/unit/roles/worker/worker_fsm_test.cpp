// SPDX-License-Identifier: MIT
// The worker's decisions without ZooKeeper (roles/worker/detail/worker_fsm.hpp): listings in,
// actions out, and each publish (T4) stepped by hand with the answers a server would give, lost
// ones too.
#include "roles/worker/detail/worker_fsm.hpp"

#include "protocol/ids.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using protocol::op_code;
using protocol::txn_answer;
using protocol::txn_op;
using kind = worker_action::kind;
using step_kind = publish_fsm::step::kind;

namespace {

const std::string a = "t4-1763733600123-3fa9c2d1000001";
const std::string b = "t4-1763733600123-3fa9c2d1000002";

protocol::layout test_layout() {
    protocol::layout l;
    l.pending_shards = 4;
    l.result_shards = 4;
    return l;
}

protocol::member_info me() {
    protocol::member_info m;
    m.id = "w1";
    m.host = "h";
    m.pid = 1;
    m.capacity = 4;
    m.types = {"echo"};
    m.started_ms = 1;
    return m;
}

txn_answer ok(std::size_t n) {
    return {false, std::vector<op_code>(n, op_code::ok)};
}

/// A failure of op `i` of `n` with `c`.
txn_answer failed_at(std::size_t n, std::size_t i, op_code c) {
    txn_answer r{true, std::vector<op_code>(n, op_code::not_run)};
    for (std::size_t k = 0; k < i; ++k) {
        r.per_op[k] = op_code::ok;
    }
    r.per_op[i] = c;
    return r;
}

/// The connection dropped with the transaction in flight: no per-op results.
const txn_answer lost{true, {}};

std::string marker(const std::string& tid) {
    return tid + ".cancel";
}

class WorkerFsm : public ::testing::Test {
protected:
    worker_stats stats;
    worker_fsm w{test_layout(), me(), stats};
    protocol::layout l = test_layout();

    /// Lists `names` and returns the kinds of the actions, in order.
    std::vector<kind> list(const std::vector<std::string>& names) {
        last = w.listed(names);
        std::vector<kind> out;
        for (const auto& x : last) {
            out.push_back(x.what);
        }
        return out;
    }
    std::vector<worker_action> last;

    txn_op remove_assignment(const std::string& tid) const {
        return txn_op::remove(protocol::layout::assignment("w1", tid));
    }
    txn_op create_result(const std::string& tid) const {
        return txn_op::create(l.result(tid), "R");
    }
};

}  // namespace

TEST_F(WorkerFsm, AListingStartsEachNewAssignmentOnce) {
    EXPECT_EQ(list({a}), std::vector<kind>{kind::run});
    EXPECT_EQ(last[0].tid, a);
    EXPECT_EQ(list({a, b}), std::vector<kind>{kind::run});
    EXPECT_EQ(last[0].tid, b);
    EXPECT_TRUE(list({a, b}).empty());
    EXPECT_EQ(stats.started, 2U);
    EXPECT_EQ(w.in_hand(), 2U);
}

TEST_F(WorkerFsm, ACancelMarkerStopsItsTaskOnceAndAStrayMarkerIsDeleted) {
    list({a});
    EXPECT_EQ(list({a, marker(a)}), std::vector<kind>{kind::stop});
    EXPECT_TRUE(w.cancelled(a));
    EXPECT_TRUE(list({a, marker(a)}).empty());  // stopped once
    EXPECT_EQ(stats.cancelled, 1U);

    // A marker whose task is neither here nor assigned (it finished first) is litter.
    EXPECT_EQ(list({a, marker(a), marker(b)}), std::vector<kind>{kind::remove_marker});
    ASSERT_EQ(last[0].ops.size(), 1U);
    EXPECT_EQ(last[0].ops[0], txn_op::remove(protocol::layout::cancel_marker("w1", b)));
}

TEST_F(WorkerFsm, AnAssignmentAndItsMarkerInOneListingStartAndStopIt) {
    EXPECT_EQ(list({marker(a), a}), (std::vector<kind>{kind::run, kind::stop}));
    EXPECT_TRUE(w.cancelled(a));
}

TEST_F(WorkerFsm, ADeletedDirectoryIsMadeAgain) {
    const auto x = w.dir_missing();
    EXPECT_EQ(x.what, kind::remake_dir);
    ASSERT_EQ(x.ops.size(), 1U);
    EXPECT_EQ(x.ops[0], txn_op::create(protocol::layout::assign_dir("w1"), ""));
}

TEST_F(WorkerFsm, APublishDeletesTheAssignmentAndCreatesTheResult) {
    list({a});
    auto s = w.publish(a, "R");
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(s.ops, (std::vector<txn_op>{remove_assignment(a), create_result(a)}));
    s = w.publish_answered(a, ok(2));
    ASSERT_EQ(s.what, step_kind::done);
    EXPECT_EQ(s.end, publish_end::published);
    w.task_ended(a, s.end);
    EXPECT_EQ(stats.published, 1U);
    EXPECT_EQ(w.in_hand(), 0U);
}

TEST_F(WorkerFsm, ACancelledTasksPublishDeletesItsMarkerToo) {
    list({a, marker(a)});
    const auto s = w.publish(a, "R");
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(
        s.ops, (std::vector<txn_op>{
                   remove_assignment(a), txn_op::remove(protocol::layout::cancel_marker("w1", a)),
                   create_result(a)})
    );
}

TEST_F(WorkerFsm, ALostAnswerThenAMissingAssignmentMeansThatTryApplied) {
    list({a});
    auto s = w.publish(a, "R");
    s = w.publish_answered(a, lost);
    ASSERT_EQ(s.what, step_kind::reconnect);
    s = w.publish_reconnected(a, true);
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(s.ops, (std::vector<txn_op>{remove_assignment(a), create_result(a)}));
    // The first try applied: its delete went, and its result may be consumed already.
    s = w.publish_answered(a, failed_at(2, 0, op_code::no_node));
    ASSERT_EQ(s.what, step_kind::done);
    EXPECT_EQ(s.end, publish_end::published_by_lost_try);  // not published again
    w.task_ended(a, s.end);
    EXPECT_EQ(stats.published, 1U);
    EXPECT_EQ(stats.discarded, 0U);
}

TEST_F(WorkerFsm, AnAnsweredFailureThatIsRetriedDoesNotCountAsMaybeApplied) {
    list({a});
    auto s = w.publish(a, "R");
    s = w.publish_answered(a, failed_at(2, 1, op_code::other));
    ASSERT_EQ(s.what, step_kind::reconnect);
    s = w.publish_reconnected(a, true);
    ASSERT_EQ(s.what, step_kind::send);
    // Every try was answered: a missing assignment was deleted by someone else.
    s = w.publish_answered(a, failed_at(2, 0, op_code::no_node));
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(s.ops[0], txn_op::check(protocol::layout::worker("w1")));
}

TEST_F(WorkerFsm, AnAssignmentDeletedWhileRunningIsPublishedCheckedAgainstWorkers) {
    list({a});
    EXPECT_TRUE(list({}).empty());  // gone from the listing: the task runs on
    EXPECT_TRUE(w.in_hand(a));
    auto s = w.publish(a, "R");
    s = w.publish_answered(a, failed_at(2, 0, op_code::no_node));
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(
        s.ops,
        (std::vector<txn_op>{txn_op::check(protocol::layout::worker("w1")), create_result(a)})
    );
    s = w.publish_answered(a, ok(2));
    ASSERT_EQ(s.what, step_kind::done);
    EXPECT_EQ(s.end, publish_end::published);
}

TEST_F(WorkerFsm, AnAssignmentTakenBackWithOurWorkersNodeDiscardsTheResult) {
    list({a});
    auto s = w.publish(a, "R");
    s = w.publish_answered(a, failed_at(2, 0, op_code::no_node));
    s = w.publish_answered(a, failed_at(2, 0, op_code::no_node));
    ASSERT_EQ(s.what, step_kind::done);
    EXPECT_EQ(s.end, publish_end::discarded);
    w.task_ended(a, s.end);
    EXPECT_EQ(stats.discarded, 1U);
    EXPECT_EQ(stats.published, 0U);
}

TEST_F(WorkerFsm, AnExistingResultLeavesOnlyTheDeletes) {
    list({a});
    auto s = w.publish(a, "R");
    s = w.publish_answered(a, failed_at(2, 1, op_code::node_exists));
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(s.ops, std::vector<txn_op>{remove_assignment(a)});
    s = w.publish_answered(a, ok(1));
    EXPECT_EQ(s.end, publish_end::published);
}

TEST_F(WorkerFsm, ACancelDuringAPublishAddsTheMarkersDeleteToTheNextTry) {
    list({a});
    auto s = w.publish(a, "R");
    ASSERT_EQ(s.ops.size(), 2U);
    // The master's T7 lands while the first try is out.
    EXPECT_EQ(list({a, marker(a)}), std::vector<kind>{kind::stop});
    // The answer to the try in flight is read as that try was built (two ops).
    s = w.publish_answered(a, failed_at(2, 1, op_code::node_exists));
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(
        s.ops, (std::vector<txn_op>{
                   remove_assignment(a), txn_op::remove(protocol::layout::cancel_marker("w1", a))})
    );
    // The marker went meanwhile (T6 of a former session, someone): the delete goes alone.
    s = w.publish_answered(a, failed_at(2, 1, op_code::no_node));
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(s.ops, std::vector<txn_op>{remove_assignment(a)});
}

TEST_F(WorkerFsm, ForeignChildrenBelowTheAssignmentAreClearedFirst) {
    list({a});
    auto s = w.publish(a, "R");
    s = w.publish_answered(a, failed_at(2, 0, op_code::not_empty));
    ASSERT_EQ(s.what, step_kind::clear_foreign);
    EXPECT_EQ(s.path, protocol::layout::assignment("w1", a));
    s = w.publish_cleared(a, true);
    EXPECT_EQ(s.what, step_kind::send);
    s = w.publish_answered(a, failed_at(2, 0, op_code::not_empty));
    s = w.publish_cleared(a, false);
    EXPECT_EQ(s.what, step_kind::reconnect);
}

TEST_F(WorkerFsm, APublishGivesUpWhenTheSessionIsGoneOrAfterTenTries) {
    list({a, b});
    auto s = w.publish(a, "R");
    s = w.publish_answered(a, lost);
    s = w.publish_reconnected(a, false);  // expired
    ASSERT_EQ(s.what, step_kind::done);
    EXPECT_EQ(s.end, publish_end::given_up);

    s = w.publish(b, "R");
    int sends = 1;
    while (s.what != step_kind::done) {
        s = w.publish_answered(b, lost);
        ASSERT_EQ(s.what, step_kind::reconnect);
        s = w.publish_reconnected(b, true);
        sends += s.what == step_kind::send ? 1 : 0;
    }
    EXPECT_EQ(sends, publish_fsm::max_tries);
    EXPECT_EQ(s.end, publish_end::given_up);
}

TEST_F(WorkerFsm, ADrainMarksTheNodeAndEndsOnceTheTasksInHandAreOver) {
    list({a});
    const auto x = w.drain();
    EXPECT_EQ(x.what, kind::mark_draining);
    ASSERT_EQ(x.ops.size(), 1U);
    EXPECT_EQ(x.ops[0].what, txn_op::kind::set);
    EXPECT_EQ(x.ops[0].path, protocol::layout::worker("w1"));
    auto node = protocol::decode_worker(x.ops[0].data);
    ASSERT_TRUE(node);
    EXPECT_TRUE(node->draining);
    EXPECT_EQ(node->types, std::vector<std::string>{"echo"});
    EXPECT_FALSE(w.drained());
    // Assigned before the master saw the drain: still run and published.
    EXPECT_EQ(list({a, b}), std::vector<kind>{kind::run});
    w.task_ended(a, publish_end::published);
    EXPECT_FALSE(w.drained());
    w.task_ended(b, publish_end::published);
    EXPECT_TRUE(w.drained());
}

TEST_F(WorkerFsm, ADrainWithNothingInHandIsOverAtOnce) {
    EXPECT_FALSE(w.drained());
    w.drain();
    EXPECT_TRUE(w.drained());
}

TEST_F(WorkerFsm, StoppingNamesTheTasksInHandAndStartsNothingMore) {
    list({a, b});
    w.task_ended(a, publish_end::published);
    EXPECT_EQ(w.stop(), std::vector<std::string>{b});
    EXPECT_TRUE(w.stopping());
    EXPECT_TRUE(list({a, b, "t4-1763733600123-3fa9c2d1000003"}).empty());
    w.task_ended(b, std::nullopt);  // not published
    EXPECT_EQ(stats.published, 1U);
    EXPECT_EQ(stats.discarded, 0U);
}

// --- following the directory by its change log (docs/protocol.md §6) -------------------------

namespace {

constexpr std::int64_t dir_czxid = 77;

protocol::dir_stat dir_at(std::int32_t version, std::int32_t cversion) {
    return protocol::dir_stat{dir_czxid, version, cversion};
}

std::string log_of(const std::vector<protocol::log_entry>& entries) {
    return protocol::encode(protocol::change_log{entries});
}

}  // namespace

TEST_F(WorkerFsm, AChangeLogStartsItsAssignmentsWithTheirDataAndNoListing) {
    EXPECT_FALSE(w.log_read(dir_at(0, 0), "")) << "nothing listed yet: list first";
    EXPECT_TRUE(w.listed({}, dir_at(0, 0)).empty());
    const auto acts = w.log_read(dir_at(1, 2), log_of({{a, R"({"v":1,"type":"echo"})"}, {b, {}}}));
    ASSERT_TRUE(acts);
    ASSERT_EQ(acts->size(), 2U);
    EXPECT_EQ((*acts)[0].what, kind::run);
    EXPECT_EQ((*acts)[0].tid, a);
    EXPECT_EQ((*acts)[0].data, R"({"v":1,"type":"echo"})");
    EXPECT_EQ((*acts)[1].tid, b);
    EXPECT_FALSE((*acts)[1].data) << "no data in the log: the worker reads the assignment";
    EXPECT_EQ(stats.listings, 1U);
    EXPECT_EQ(stats.logs_read, 1U);
}

TEST_F(WorkerFsm, OurOwnPublishIsNoReasonToList) {
    w.listed({a}, dir_at(1, 1));
    auto s = w.publish(a, "{}");
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(w.publish_answered(a, ok(s.ops.size())).what, step_kind::done);
    w.task_ended(a, publish_end::published);
    // The next assignment: the directory's children moved by our delete and its create.
    const auto acts = w.log_read(dir_at(2, 3), log_of({{b, "{}"}}));
    ASSERT_TRUE(acts);
    ASSERT_EQ(acts->size(), 1U);
    EXPECT_EQ((*acts)[0].tid, b);
}

TEST_F(WorkerFsm, AMissedVersionGarbageOrAStrangersChildMeansAListing) {
    w.listed({}, dir_at(3, 6));
    EXPECT_FALSE(w.log_read(dir_at(5, 8), log_of({{a, "{}"}}))) << "version 4 missed";
    w.listed({a}, dir_at(5, 8));
    EXPECT_FALSE(w.log_read(dir_at(6, 9), "garbage")) << "not a change log";
    w.listed({a}, dir_at(6, 9));
    EXPECT_FALSE(w.log_read(dir_at(7, 11), log_of({{b, "{}"}}))) << "one create nobody logged";
    EXPECT_EQ(list({a, b}), std::vector<kind>{kind::run}) << "the listing finds b";
}

TEST_F(WorkerFsm, AMarkerInTheLogStopsItsTaskOrIsLitter) {
    w.listed({a}, dir_at(1, 1));
    auto acts = w.log_read(dir_at(2, 2), log_of({{marker(a), {}}}));
    ASSERT_TRUE(acts);
    ASSERT_EQ(acts->size(), 1U);
    EXPECT_EQ((*acts)[0].what, kind::stop);
    acts = w.log_read(dir_at(3, 3), log_of({{marker(b), {}}}));
    ASSERT_TRUE(acts);
    ASSERT_EQ(acts->size(), 1U);
    EXPECT_EQ((*acts)[0].what, kind::remove_marker) << "b is not ours: the marker is litter";
}

TEST_F(WorkerFsm, AMarkerThatCameWhileThePublishingTryWasOutIsDeletedAfterIt) {
    // Found by CrackRun (1 run in 3): the master's T7 lands while T4 is out without the
    // marker's delete; T4 commits and the marker stays. Format 1 found it at the listing
    // that T4's own delete caused; a worker following its change log lists nothing then.
    list({a});
    auto s = w.publish(a, "R");
    ASSERT_EQ(s.ops.size(), 2U);
    EXPECT_EQ(list({a, marker(a)}), std::vector<kind>{kind::stop});
    s = w.publish_answered(a, ok(2));
    ASSERT_EQ(s.what, step_kind::done);
    const auto left = w.task_ended(a, s.end);
    ASSERT_TRUE(left);
    EXPECT_EQ(left->what, kind::remove_marker);
    EXPECT_EQ(
        left->ops, std::vector<txn_op>{txn_op::remove(protocol::layout::cancel_marker("w1", a))}
    );

    // A marker the publishing try deleted leaves nothing to do.
    list({b, marker(b)});
    s = w.publish(b, "R");
    ASSERT_EQ(s.ops.size(), 3U);
    s = w.publish_answered(b, ok(3));
    EXPECT_FALSE(w.task_ended(b, s.end));
}

// --- one task of a bundle (§6 T7 "One task of a bundle") ---------------------------------------

TEST_F(WorkerFsm, ATasksOwnMarkerStopsThatTaskOfItsBundleOnly) {
    const auto bundle = protocol::bundle_id(a, 5);
    const auto entry = protocol::bundled_task_id(bundle, 2);
    list({bundle});
    EXPECT_EQ(list({bundle, marker(entry)}), std::vector<kind>{kind::stop});
    EXPECT_EQ(last[0].tid, bundle);
    ASSERT_TRUE(last[0].entry);
    EXPECT_EQ(*last[0].entry, 2U);
    EXPECT_FALSE(w.cancelled(bundle)) << "the bundle itself runs on";
    EXPECT_FALSE(w.marker_seen(bundle)) << "so a retry of its other tasks stays possible";
    EXPECT_EQ(w.entries_cancelled(bundle), (std::set<std::size_t>{2}));
    EXPECT_TRUE(list({bundle, marker(entry)}).empty());  // stopped once
    EXPECT_EQ(stats.cancelled, 1U);

    // Its publish does not delete the task's marker (T4 is as for any bundle); once the
    // result is written, the marker goes as litter.
    auto s = w.publish(bundle, "R");
    ASSERT_EQ(s.what, step_kind::send);
    EXPECT_EQ(s.ops, (std::vector<txn_op>{remove_assignment(bundle), create_result(bundle)}));
    s = w.publish_answered(bundle, ok(2));
    ASSERT_EQ(s.end, publish_end::published);
    const auto left = w.task_ended(bundle, s.end);
    ASSERT_TRUE(left);
    EXPECT_EQ(left->what, kind::remove_marker);
    EXPECT_EQ(
        left->ops, std::vector<txn_op>{txn_op::remove(protocol::layout::cancel_marker("w1", entry))}
    );
}

TEST_F(WorkerFsm, ATasksMarkerInTheSameListingAsItsBundleStopsItFromTheStart) {
    const auto bundle = protocol::bundle_id(a, 3);
    const auto entry = protocol::bundled_task_id(bundle, 0);
    EXPECT_EQ(list({marker(entry), bundle}), (std::vector<kind>{kind::run, kind::stop}));
    EXPECT_EQ(w.entries_cancelled(bundle), (std::set<std::size_t>{0}));
}

/// The ops that delete a task's marker and make its request again, one multi.
std::vector<txn_op> returned(const std::string& entry) {
    auto ops = protocol::return_entry_cancel_ops("w1", entry, 0);
    EXPECT_EQ(ops.size(), 2U);
    return ops;
}

/// `ops` hold `entry`'s marker delete followed by the create of its request.
bool returns(const std::vector<txn_op>& ops, const std::string& entry) {
    const auto want = returned(entry);
    for (std::size_t i = 0; i + 1 < ops.size(); ++i) {
        if (ops[i] == want[0]) {
            return ops[i + 1].what == txn_op::kind::create && ops[i + 1].path == want[1].path;
        }
    }
    return false;
}

TEST_F(WorkerFsm, ATasksMarkerWhoseBundleIsGoneIsARequestAgainAndADiscardedBundleKeepsIt) {
    const auto bundle = protocol::bundle_id(a, 3);
    const auto entry = protocol::bundled_task_id(bundle, 1);
    // Its bundle left (taken back, or retried, while the marker came): deleted, and the
    // task's request made again in the same multi, so that the bundle's next run skips it.
    EXPECT_EQ(list({marker(entry)}), std::vector<kind>{kind::remove_marker});
    ASSERT_EQ(last[0].ops.size(), 2U);
    EXPECT_TRUE(returns(last[0].ops, entry));
    EXPECT_EQ(returned(entry)[1].path, protocol::layout::cancel_request(entry));
    EXPECT_TRUE(protocol::decode_cancel(last[0].ops[1].data)) << "a request as a client makes";

    // A bundle whose result was discarded (taken back by T6): its task's marker stays; T6,
    // or the listing after, makes it a request again.
    list({bundle, marker(entry)});
    w.publish(bundle, "R");
    EXPECT_FALSE(w.task_ended(bundle, publish_end::discarded));
    EXPECT_EQ(w.in_hand(), 0U);
    EXPECT_EQ(list({marker(entry)}), std::vector<kind>{kind::remove_marker});
    EXPECT_TRUE(returns(last[0].ops, entry));
}

TEST_F(WorkerFsm, AMarkerThatCameAfterTheBundlesRetryWasBuiltIsARequestAgain) {
    const auto bundle = protocol::bundle_id(a, 4);
    const auto one = protocol::bundled_task_id(bundle, 1);
    const auto two = protocol::bundled_task_id(bundle, 2);
    list({bundle, marker(one)});
    ASSERT_EQ(w.entries_cancelled(bundle), (std::set<std::size_t>{1}));
    // The retry is built with task 1 cancelled; task 2's marker comes while it is out.
    auto s = w.publish(bundle, "RETRY", l.delayed_task(bundle));
    EXPECT_EQ(list({bundle, marker(one), marker(two)}), std::vector<kind>{kind::stop});
    s = w.publish_answered(bundle, ok(2));
    ASSERT_EQ(s.end, publish_end::published);
    const auto left = w.task_ended(bundle, s.end);
    ASSERT_TRUE(left);
    EXPECT_EQ(left->what, kind::remove_marker);
    // Task 1 is cancelled in the retry: its marker is litter. Task 2 would run again: its
    // request comes back with its marker's delete.
    ASSERT_EQ(left->ops.size(), 3U);
    EXPECT_EQ(left->ops[0], txn_op::remove(protocol::layout::cancel_marker("w1", one)));
    EXPECT_TRUE(returns(left->ops, two));

    // A final result instead: every task's marker is litter.
    const auto other = protocol::bundle_id(b, 4);
    list({other, marker(protocol::bundled_task_id(other, 3))});
    w.publish(other, "R");
    list(
        {other, marker(protocol::bundled_task_id(other, 3)),
         marker(protocol::bundled_task_id(other, 0))}
    );
    const auto done = w.task_ended(other, publish_end::published);
    ASSERT_TRUE(done);
    EXPECT_EQ(done->ops.size(), 2U);
    for (const auto& op : done->ops) {
        EXPECT_EQ(op.what, txn_op::kind::remove);
    }
}

TEST_F(WorkerFsm, AMarkerNamingNoTaskOfTheBundleIsLitter) {
    const auto bundle = protocol::bundle_id(a, 3);
    list({bundle});
    // `.3` is past the bundle's size: no task of it, and no task id either.
    EXPECT_EQ(list({bundle, marker(bundle + ".3")}), std::vector<kind>{kind::remove_marker});
    EXPECT_TRUE(w.entries_cancelled(bundle).empty());
}

}  // namespace ZKD_UNITY_ID
