// SPDX-License-Identifier: MIT
// A bundle's tasks published early in result nodes of their own (docs/protocol.md §6 T4e):
// the bundle's flag and fields (protocol/delay.hpp read_entry_results, read_published,
// with_published, retry_left), the T4e transaction (protocol/worker_txn.hpp), and what the
// results after it keep of `published`: the worker's retry node and final result, and the
// results the master writes (protocol/master_txn.hpp master_result, departed_ops).
#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "protocol/task.hpp"
#include "protocol/worker_txn.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;
using namespace std::chrono_literals;

namespace {

const backoff_policy no_retries{0, 1000ms, 60'000ms};
const std::string bundle = bundle_id("t4-1763733600123-3fa9c2d1000001", 3);

/// A bundle of three tasks as assigned, with the flag when `flagged` and `extra` members.
std::string assigned(bool flagged, const std::string& extra = {}) {
    std::string s = R"({"v":1,"type":"sleep","bundle":[1,2000,3],)";
    if (flagged) {
        s += R"("entry_results":true,)";
    }
    return s + extra + R"("attempt":1,"epoch":7,"assigned_ms":10,"worker":"w1"})";
}

task_result entry(task_state state, std::string code = {}, boost::json::value value = nullptr) {
    task_result r;
    r.state = state;
    if (state == task_state::succeeded) {
        r.value = std::move(value);
    } else {
        r.error = task_error{std::move(code), "m"};
    }
    return r;
}

task_result result_in(const txn_op& op) {
    auto r = decode_result(op.data);
    EXPECT_TRUE(r) << op.data;
    return r ? *r : task_result{};
}

}  // namespace

TEST(EarlyResults, OnlyABundleWhoseNodeSaysTrueAsksForThem) {
    EXPECT_TRUE(read_entry_results(assigned(true)));
    EXPECT_FALSE(read_entry_results(assigned(false)));
    // Garbage is absent: a worker publishes nothing early.
    EXPECT_FALSE(read_entry_results(assigned(false, R"("entry_results":1,)")));
    EXPECT_FALSE(read_entry_results(assigned(false, R"("entry_results":"true",)")));
    EXPECT_FALSE(read_entry_results(assigned(false, R"("entry_results":false,)")));
    EXPECT_FALSE(read_entry_results(R"({"v":1,"type":"echo","entry_results":true})"));
    EXPECT_FALSE(read_entry_results("not json"));
}

TEST(EarlyResults, APublishedTaskIsAddedToFinishedAndPublished) {
    const auto first =
        with_published(assigned(true), 3, {{0, entry(task_state::succeeded, {}, 1)}});
    ASSERT_TRUE(first);
    auto finished = read_finished(*first, 3);
    ASSERT_TRUE(finished[0]);
    EXPECT_EQ(*finished[0], entry(task_state::succeeded, {}, 1));
    EXPECT_FALSE(finished[1]);
    EXPECT_FALSE(finished[2]);
    EXPECT_EQ(read_published(*first, finished), (std::vector<std::size_t>{0}));
    // The rest of the node is kept: the task, its assignment, the flag.
    auto node = decode_task_node(bundle, *first);
    ASSERT_TRUE(node) << *first;
    EXPECT_EQ(node->task.type, "sleep");
    EXPECT_EQ(node->assigned.epoch, 7);
    EXPECT_TRUE(read_entry_results(*first));
    // A second T4e adds to both, ascending.
    const auto second = with_published(*first, 3, {{2, entry(task_state::failed, "bad_args")}});
    ASSERT_TRUE(second);
    finished = read_finished(*second, 3);
    ASSERT_TRUE(finished[0]);
    ASSERT_TRUE(finished[2]);
    EXPECT_EQ(*finished[2], entry(task_state::failed, "bad_args"));
    EXPECT_FALSE(finished[1]) << "still to run";
    EXPECT_EQ(read_published(*second, finished), (std::vector<std::size_t>{0, 2}));
    // Within the node's bound as any task.
    EXPECT_TRUE(task_size_ok(*second));
    // An index out of range, or a node that is no object: nothing.
    EXPECT_FALSE(with_published(assigned(true), 3, {{3, entry(task_state::succeeded, {}, 1)}}));
    EXPECT_FALSE(with_published("[]", 3, {{0, entry(task_state::succeeded, {}, 1)}}));
}

TEST(EarlyResults, PublishedCountsOnlyWithItsFinishedEntry) {
    const auto node = assigned(
        true, R"("finished":[{"state":"succeeded","value":1},null,null],"published":[1,0,0,7],)"
    );
    const auto finished = read_finished(node, 3);
    // 1 has no entry (it would run again), 7 is no task: only 0 counts.
    EXPECT_EQ(read_published(node, finished), (std::vector<std::size_t>{0}));
    EXPECT_TRUE(read_published(assigned(true, R"("published":"x",)"), finished).empty());
    EXPECT_TRUE(read_published(assigned(true, R"("published":[0,"x"],)"), finished).empty());
    EXPECT_TRUE(read_published(assigned(true), finished).empty());
}

TEST(EarlyResults, ARetryableEndIsFinalOnlyWithNoRetryLeft) {
    EXPECT_FALSE(retry_left(assigned(true), no_retries));
    EXPECT_TRUE(retry_left(assigned(true, R"("retries":1,)"), no_retries));
    EXPECT_TRUE(retry_left(assigned(true), backoff_policy{2, 1000ms, 60'000ms})) << "the default";
    EXPECT_FALSE(retry_left(assigned(true, R"("retries":1,"try":2,)"), no_retries)) << "the last";
    EXPECT_FALSE(retry_left(assigned(true, R"("retries":0,)"), backoff_policy{2, 1000ms, 60'000ms}))
        << "the task's own wins";
}

TEST(EarlyResults, ATaskResultIsAPlainResultWithTheBundlesRunAndItsOwnEnd) {
    const auto id = bundled_task_id(bundle, 0);
    const auto data = early_result_data(
        entry(task_state::succeeded, {}, boost::json::value{{"slept_ms", 1}}), id, 2, "w1", 100,
        105, assigned(true)
    );
    auto r = decode_result(data);
    ASSERT_TRUE(r) << data;
    EXPECT_EQ(r->task, id);
    EXPECT_EQ(r->state, task_state::succeeded);
    EXPECT_EQ(r->value, (boost::json::value{{"slept_ms", 1}}));
    EXPECT_EQ(r->attempt, 2);
    EXPECT_EQ(r->worker, "w1");
    EXPECT_EQ(r->started_ms, 100);
    EXPECT_EQ(r->finished_ms, 105);
    EXPECT_TRUE(r->bundle.empty());
    EXPECT_EQ(r->try_number, 0);
    // A retry's carries the bundle's tries.
    const auto retried = early_result_data(
        entry(task_state::failed, "bad_args"), id, 1, "w1", 100, 105,
        assigned(
            true,
            R"("retries":2,"try":2,"errors":[{"try":1,"code":"timeout","message":"t","finished_ms":50}],)"
        )
    );
    r = decode_result(retried);
    ASSERT_TRUE(r) << retried;
    EXPECT_EQ(r->try_number, 2);
    EXPECT_EQ(r->errors.size(), 1U);
    ASSERT_TRUE(r->error);
    EXPECT_EQ(r->error->code, "bad_args");
}

TEST(EarlyResults, T4eSetsTheAssignmentAtItsVersionAndCreatesEachTasksResult) {
    layout l;
    const auto one = bundled_task_id(bundle, 0);
    const auto three = bundled_task_id(bundle, 2);
    const auto ops = early_results_ops(l, "w1", bundle, "DATA", 4, {{one, "R0"}, {three, "R2"}});
    const auto dir = layout::client_results("3fa9c2d1");
    EXPECT_EQ(
        ops, (std::vector<txn_op>{
                 txn_op::set("/assign/w1/" + bundle, "DATA", 4),
                 txn_op::create(dir + "/" + one, "R0"), txn_op::create(dir + "/" + three, "R2")})
    );
    // In the bundle's client's directory, as its result (layout::result_dir of the bundle).
    EXPECT_EQ(ops[1].path, l.result(bundle).substr(0, l.result(bundle).rfind('/') + 1) + one);
}

TEST(EarlyResults, T4eAnswersSayWhetherItAppliedAndWhyNot) {
    EXPECT_EQ(read_early(txn_answer{false, {}}, 2), early_outcome::committed);
    EXPECT_EQ(read_early(txn_answer{true, {}}, 2), early_outcome::unknown);
    using c = op_code;
    EXPECT_EQ(
        read_early(txn_answer{true, {c::no_node, c::not_run, c::not_run}}, 2),
        early_outcome::assignment_gone
    );
    EXPECT_EQ(
        read_early(txn_answer{true, {c::bad_version, c::not_run, c::not_run}}, 2),
        early_outcome::assignment_changed
    );
    EXPECT_EQ(
        read_early(txn_answer{true, {c::ok, c::ok, c::node_exists}}, 2),
        early_outcome::result_exists
    );
    EXPECT_EQ(read_early(txn_answer{true, {c::ok, c::other}}, 1), early_outcome::failed);
    EXPECT_EQ(read_early(txn_answer{true, {c::ok, c::ok}}, 2), early_outcome::unknown)
        << "not this transaction's answer";
}

TEST(EarlyResults, ABundlesResultListsPublishedAndReadsBack) {
    task_result r;
    r.task = bundle;
    r.bundle = {
        entry(task_state::succeeded, {}, 1), entry(task_state::succeeded, {}, 2),
        entry(task_state::succeeded, {}, 3)};
    summarize_bundle(r);
    r.published = {0, 2};
    const auto text = encode(r);
    EXPECT_NE(text.find(R"("published":[0,2])"), std::string::npos) << text;
    auto back = decode_result(text);
    ASSERT_TRUE(back) << text;
    EXPECT_EQ(back->published, (std::vector<std::size_t>{0, 2}));
    // Absent when none was: the result as before.
    r.published.clear();
    EXPECT_EQ(encode(r).find("published"), std::string::npos);
    // Garbage there is a garbage result, as for `consumed`.
    EXPECT_FALSE(
        decode_result(R"({"v":1,"task":"x","state":"succeeded","value":null,"published":3})")
    );
    EXPECT_FALSE(
        decode_result(R"({"v":1,"task":"x","state":"succeeded","value":null,"published":[-1]})")
    );
    // A task's result taken from the bundle's own (no entries) does not carry it.
    task_result whole;
    whole.task = bundle;
    whole.state = task_state::lost;
    whole.error = task_error{"attempts_exhausted", "m"};
    whole.published = {1};
    auto one = bundled_result(whole, 0, bundled_task_id(bundle, 0));
    ASSERT_TRUE(one);
    EXPECT_TRUE(one->published.empty());
}

TEST(EarlyResults, ARetryNodeKeepsPublishedAndTheirEntries) {
    // Task 0 was published early (bad_args: final); task 1 timed out, task 2 succeeded.
    const auto held = with_published(
        assigned(true, R"("retries":2,)"), 3, {{0, entry(task_state::failed, "bad_args")}}
    );
    ASSERT_TRUE(held);
    const std::vector<task_result> entries{
        entry(task_state::failed, "bad_args"), entry(task_state::timed_out, "timeout"),
        entry(task_state::succeeded, {}, 3)};
    const task_error summary{"handler_error", "2 of 3 tasks of the bundle did not succeed"};
    const auto plan = plan_bundle_retry(*held, entries, summary, 50'000, no_retries, 7);
    ASSERT_TRUE(plan);
    const auto finished = read_finished(plan->data, 3);
    ASSERT_TRUE(finished[0]);
    EXPECT_FALSE(finished[1]) << "runs again";
    ASSERT_TRUE(finished[2]);
    EXPECT_EQ(read_published(plan->data, finished), (std::vector<std::size_t>{0}));
    EXPECT_TRUE(read_entry_results(plan->data));
}

TEST(EarlyResults, APublishedRetryableEndStaysFinalUnderAnotherWorkersRetryDefault) {
    // Worker A, with no retry, published task 0 timed out (final for it); the bundle was
    // requeued to worker B whose type default is 2 retries, and its try fails in task 1.
    const auto held =
        with_published(assigned(true), 2, {{0, entry(task_state::timed_out, "timeout")}});
    ASSERT_TRUE(held);
    const std::vector<task_result> entries{
        entry(task_state::timed_out, "timeout"), entry(task_state::failed, "handler_error")};
    const task_error summary{"handler_error", "2 of 2 tasks of the bundle did not succeed"};
    const backoff_policy two{2, 1000ms, 60'000ms};
    const auto plan = plan_bundle_retry(*held, entries, summary, 50'000, two, 7);
    ASSERT_TRUE(plan);
    const auto finished = read_finished(plan->data, 2);
    ASSERT_TRUE(finished[0]) << "published: never runs again";
    EXPECT_EQ(*finished[0], entry(task_state::timed_out, "timeout"));
    EXPECT_FALSE(finished[1]) << "runs again";
    EXPECT_EQ(read_published(plan->data, finished), (std::vector<std::size_t>{0}));
    // Only the published one failing retryably: nothing to retry, the result goes out.
    const std::vector<task_result> only{
        entry(task_state::timed_out, "timeout"), entry(task_state::succeeded, {}, 1)};
    EXPECT_FALSE(plan_bundle_retry(*held, only, summary, 50'000, two, 7));
    // Its own cancel came late (cancel_retryable_entries): its kept entry is as published.
    const std::vector<task_result> late{
        entry(task_state::cancelled, "cancelled"), entry(task_state::failed, "handler_error")};
    const auto kept = plan_bundle_retry(*held, late, summary, 50'000, two, 7);
    ASSERT_TRUE(kept);
    const auto as_published = read_finished(kept->data, 2);
    ASSERT_TRUE(as_published[0]);
    EXPECT_EQ(*as_published[0], entry(task_state::timed_out, "timeout"));
}

TEST(EarlyResults, TheMastersResultForABundleKeepsPublished) {
    const layout l;
    const auto held = with_published(assigned(true), 3, {{1, entry(task_state::succeeded, {}, 2)}});
    ASSERT_TRUE(held);
    auto o = boost::json::parse(*held).as_object();
    o["max_attempts"] = 1;
    const auto node = boost::json::serialize(o);
    // Its worker died on its last attempt: lost, but task 1 keeps its outcome and `published`.
    const auto lost = departed_ops(l, "w1", bundle, node, false, 90'000);
    ASSERT_EQ(lost.kind, departed_kind::lost);
    const auto r = result_in(lost.ops.back());
    ASSERT_EQ(r.bundle.size(), 3U);
    EXPECT_EQ(r.bundle[1], entry(task_state::succeeded, {}, 2));
    EXPECT_EQ(r.bundle[0].state, task_state::lost);
    EXPECT_EQ(r.published, (std::vector<std::size_t>{1}));
    // Cancelled whole, the same.
    const auto cancelled = departed_ops(l, "w1", bundle, node, true, 90'000);
    ASSERT_EQ(cancelled.kind, departed_kind::cancel);
    EXPECT_EQ(result_in(cancelled.ops.back()).published, (std::vector<std::size_t>{1}));
    // Attempts left: back to pending with the node's bytes as they were (finished, published).
    o["max_attempts"] = 3;
    const auto requeue = departed_ops(l, "w1", bundle, boost::json::serialize(o), false, 90'000);
    ASSERT_EQ(requeue.kind, departed_kind::requeue);
    const auto& pending = requeue.ops.back().what == txn_op::kind::create
                              ? requeue.ops.back()
                              : requeue.ops[requeue.ops.size() - 2];
    const auto finished = read_finished(pending.data, 3);
    ASSERT_TRUE(finished[1]);
    EXPECT_EQ(read_published(pending.data, finished), (std::vector<std::size_t>{1}));
    // A node without the fields: as before, one result for all, no `published`.
    o.erase("finished");
    o.erase("published");
    o["max_attempts"] = 1;
    const auto plain = departed_ops(l, "w1", bundle, boost::json::serialize(o), false, 90'000);
    const auto whole = result_in(plain.ops.back());
    EXPECT_TRUE(whole.bundle.empty());
    EXPECT_TRUE(whole.published.empty());
}

}  // namespace ZKD_UNITY_ID
