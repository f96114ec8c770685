// SPDX-License-Identifier: MIT
// One task of a bundle on its own: a bundle's retry of only its failed tasks (§4.3 "Bundles":
// protocol/delay.hpp plan_bundle_retry, read_finished), the entries it carries
// (protocol/task.hpp encode_entry, decode_entry), and the transactions of a task's own
// cancel (§6 T7 "One task of a bundle", T6: protocol/master_txn.hpp).
#include "protocol/delay.hpp"
#include "protocol/ids.hpp"
#include "protocol/layout.hpp"
#include "protocol/master_txn.hpp"
#include "protocol/task.hpp"

#include <boost/json.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;
using namespace std::chrono_literals;

namespace {

const backoff_policy no_retries{0, 1000ms, 60'000ms};
const std::string bundle = bundle_id("t4-1763733600123-3fa9c2d1000001", 5);

/// A bundle of five tasks as assigned, with `retries` (absent when negative).
std::string assigned(int retries) {
    std::string s = R"({"v":1,"type":"sh","bundle":[0,1,2,3,4],"backoff_ms":100,)";
    if (retries >= 0) {
        s += R"("retries":)" + std::to_string(retries) + ",";
    }
    return s + R"("attempt":1,"epoch":7,"assigned_ms":10,"worker":"w-1-aa","running_ms":11})";
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

/// succeeded, failed (retryable), cancelled, bad_args, timed_out.
std::vector<task_result> first_try() {
    return {
        entry(task_state::succeeded, {}, 10), entry(task_state::failed, "handler_error"),
        entry(task_state::cancelled, "cancelled"), entry(task_state::failed, "bad_args"),
        entry(task_state::timed_out, "timeout")};
}

const task_error summary{"handler_error", "4 of 5 tasks of the bundle did not succeed"};

}  // namespace

TEST(BundleEntry, AnEntryIsItsStateAndValueOrErrorAndReadsBack) {
    const auto ok = entry(task_state::succeeded, {}, boost::json::value{{"sum", 3}});
    EXPECT_EQ(
        boost::json::serialize(encode_entry(ok)), R"({"state":"succeeded","value":{"sum":3}})"
    );
    EXPECT_EQ(decode_entry(encode_entry(ok)).value(), ok);
    const auto bad = entry(task_state::failed, "bad_args");
    EXPECT_EQ(
        boost::json::serialize(encode_entry(bad)),
        R"({"state":"failed","error":{"code":"bad_args","message":"m"}})"
    );
    EXPECT_EQ(decode_entry(encode_entry(bad)).value(), bad);
    EXPECT_FALSE(decode_entry(boost::json::object{{"state", "failed"}}));   // no error
    EXPECT_FALSE(decode_entry(boost::json::object{{"state", "pending"}}));  // no result state
}

// A task's own cancel that came after its try failed: it ends cancelled and no retry runs it;
// a task that ended otherwise keeps its end.
TEST(BundleRetry, ATaskCancelledAfterItsTryFailedIsNotRunAgain) {
    auto entries = first_try();
    cancel_retryable_entries(entries, {0, 1, 3, 9});  // 9: no such task, ignored
    EXPECT_EQ(entries[0], first_try()[0]);            // succeeded: kept
    EXPECT_EQ(entries[1].state, task_state::cancelled);
    ASSERT_TRUE(entries[1].error);
    EXPECT_EQ(entries[1].error->code, "cancelled");
    EXPECT_EQ(entries[3], first_try()[3]);  // bad_args: no retry mends it, kept
    EXPECT_EQ(entries[4], first_try()[4]);  // not cancelled: still retried
    const auto plan = plan_bundle_retry(assigned(2), entries, summary, 50'000, no_retries, 7);
    ASSERT_TRUE(plan.has_value());
    const auto done = read_finished(plan->data, 5);
    ASSERT_EQ(done.size(), 5U);
    EXPECT_EQ(done[1], entries[1]);  // final: cancelled
    EXPECT_FALSE(done[4]);           // the timeout alone runs again
    // With only the cancelled one failed, nothing is retried.
    auto one = first_try();
    one[4] = entry(task_state::succeeded, {}, 14);
    cancel_retryable_entries(one, {1});
    EXPECT_FALSE(plan_bundle_retry(assigned(2), one, summary, 50'000, no_retries, 7));
}

TEST(BundleRetry, OnlyTheTasksThatFailedRetryablyRunAgain) {
    const auto plan = plan_bundle_retry(assigned(2), first_try(), summary, 50'000, no_retries, 7);
    ASSERT_TRUE(plan.has_value());
    EXPECT_EQ(plan->next_try, 2);
    EXPECT_EQ(plan->due_ms, 50'000 + 7);  // retry 1: jitter over [0, 100]
    // The node is the bundle as submitted (still a bundle of five), a retry of it.
    const auto node = decode_task_node(bundle, plan->data);
    ASSERT_TRUE(node.has_value()) << node.error().message;
    EXPECT_EQ(node->task.bundle.size(), 5U);
    EXPECT_EQ(node->assigned, assignment{});
    const auto f = read_delay_fields(plan->data);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->try_number, 2);
    ASSERT_EQ(f->errors.size(), 1U);  // the try's summary
    EXPECT_EQ(f->errors[0].at("message").as_string(), summary.message);
    // Finished for good: succeeded, cancelled, bad_args; run again: the failure, the timeout.
    const auto done = read_finished(plan->data, 5);
    ASSERT_EQ(done.size(), 5U);
    EXPECT_EQ(done[0], first_try()[0]);
    EXPECT_FALSE(done[1]);
    EXPECT_EQ(done[2], first_try()[2]);
    EXPECT_EQ(done[3], first_try()[3]);
    EXPECT_FALSE(done[4]);

    // The second try: task 1 now succeeds, task 4 times out again. Task 4 alone is left.
    auto second = first_try();
    second[1] = entry(task_state::succeeded, {}, 11);
    const auto again = plan_bundle_retry(plan->data, second, summary, 60'000, no_retries, 1);
    ASSERT_TRUE(again.has_value());
    EXPECT_EQ(again->next_try, 3);
    const auto left = read_finished(again->data, 5);
    EXPECT_EQ(left[1], second[1]);
    EXPECT_FALSE(left[4]);
    EXPECT_EQ(read_delay_fields(again->data)->errors.size(), 2U);
    // Its third try was the last of two retries.
    EXPECT_FALSE(plan_bundle_retry(again->data, second, summary, 70'000, no_retries, 1));
}

TEST(BundleRetry, NothingRetryableOrNoRetriesMeansTheResultIsFinal) {
    auto none = first_try();
    none[1] = entry(task_state::succeeded, {}, 1);
    none[4] = entry(task_state::failed, "unknown_type");
    EXPECT_FALSE(plan_bundle_retry(assigned(3), none, summary, 1, no_retries, 1));
    EXPECT_FALSE(plan_bundle_retry(assigned(0), first_try(), summary, 1, no_retries, 1));
    EXPECT_FALSE(plan_bundle_retry(assigned(-1), first_try(), summary, 1, no_retries, 1));
    EXPECT_FALSE(plan_bundle_retry("not json", first_try(), summary, 1, no_retries, 1));
}

TEST(BundleRetry, TheWorkersDefaultAppliesToABundleThatSaysNothing) {
    const backoff_policy one{1, 100ms, 100ms};
    EXPECT_TRUE(plan_bundle_retry(assigned(-1), first_try(), summary, 1, one, 1));
    EXPECT_FALSE(plan_bundle_retry(assigned(0), first_try(), summary, 1, one, 1)) << "its own 0";
}

TEST(BundleRetry, ARetryNodeThatWouldNotFitIsNotWritten) {
    // Two tasks' args of 200 KiB each and one result of 200 KiB kept: over 512 KiB together.
    const std::string big(std::size_t{200} * 1024, 'x');
    const std::string node = R"({"v":1,"type":"sh","bundle":[")" + big + R"(",")" + big +
                             R"("],"retries":1,"attempt":1})";
    const std::vector<task_result> tries{
        entry(task_state::succeeded, {}, boost::json::string(big)),
        entry(task_state::failed, "handler_error")};
    EXPECT_FALSE(plan_bundle_retry(node, tries, summary, 1, no_retries, 1));
    // Without the kept value it fits.
    const std::vector<task_result> small{
        entry(task_state::succeeded, {}, 1), entry(task_state::failed, "handler_error")};
    EXPECT_TRUE(plan_bundle_retry(node, small, summary, 1, no_retries, 1));
}

TEST(BundleRetry, FinishedOfAnotherShapeRunsEveryTask) {
    const auto none = std::vector<std::optional<task_result>>(3);
    EXPECT_EQ(read_finished(R"({"v":1})", 3), none);
    EXPECT_EQ(read_finished("garbage", 3), none);
    EXPECT_EQ(read_finished(R"({"finished":{}})", 3), none);
    EXPECT_EQ(read_finished(R"({"finished":[null,null]})", 3), none) << "not as long";
    EXPECT_EQ(read_finished(R"({"finished":[null,7,null]})", 3), none);
    EXPECT_EQ(read_finished(R"({"finished":[null,{"state":"failed"},null]})", 3), none);
    const auto some =
        read_finished(R"({"finished":[null,{"state":"succeeded","value":2},null]})", 3);
    ASSERT_TRUE(some[1]);
    EXPECT_EQ(some[1]->value, 2);
    EXPECT_FALSE(some[0]);
    EXPECT_FALSE(some[2]);
}

TEST(BundleEntryCancel, AMarkerForOneTaskNamesTheTaskAndChecksItsBundle) {
    const auto one = bundled_task_id(bundle, 1);
    EXPECT_EQ(
        cancel_entry_ops("w1", bundle, one),
        (std::vector<txn_op>{
            txn_op::check("/assign/w1/" + bundle),
            txn_op::create("/assign/w1/" + one + ".cancel", ""), txn_op::remove("/cancel/" + one)})
    );
    // Its marker is a marker, of the task `<bundle>.<k>`.
    EXPECT_TRUE(is_cancel_marker(one + ".cancel"));
    EXPECT_EQ(marker_task(one + ".cancel"), one);
}

TEST(BundleEntryCancel, T6TurnsTheTasksMarkersBackIntoRequests) {
    const auto one = bundled_task_id(bundle, 1);
    const auto two = bundled_task_id(bundle, 2);
    EXPECT_EQ(
        requeue_entry_cancels_ops("w1", {one, two}, {false, true}, 99),
        (std::vector<txn_op>{
            txn_op::remove("/assign/w1/" + one + ".cancel"),
            txn_op::create("/cancel/" + one, encode(cancel_info{99})),
            txn_op::remove("/assign/w1/" + two + ".cancel")})
    );
    EXPECT_TRUE(requeue_entry_cancels_ops("w1", {}, {}, 99).empty());
}

// --- the results the master writes for a retried bundle (§5.1, §6 T6 and T7) -----------------

namespace {

/// The second try of the bundle, as a departed worker held it: the retry node of
/// first_try() (finished: succeeded, null, cancelled, bad_args, null), assigned again at
/// `attempt` of 3.
std::string second_try_held(int attempt) {
    const auto plan = plan_bundle_retry(assigned(2), first_try(), summary, 50'000, no_retries, 7);
    EXPECT_TRUE(plan);
    auto o = boost::json::parse(plan ? plan->data : "{}").as_object();
    o["attempt"] = attempt;
    o["max_attempts"] = 3;
    o["epoch"] = 8;
    o["worker"] = "w1";
    return boost::json::serialize(o);
}

task_result result_in(const txn_op& op) {
    auto r = decode_result(op.data);
    EXPECT_TRUE(r) << op.data;
    return r ? *r : task_result{};
}

/// Each task's result as a client gives it to its caller (task_client: bundled_result).
task_state task_state_of(const task_result& whole, std::size_t k) {
    auto r = bundled_result(whole, k, bundled_task_id(bundle, k));
    EXPECT_TRUE(r);
    return r ? r->state : task_state::succeeded;
}

}  // namespace

TEST(BundleMasterResult, ALostRetryKeepsTheTasksAnEarlierTryFinished) {
    const layout l;
    const auto plan = departed_ops(l, "w1", bundle, second_try_held(3), false, 90'000);
    ASSERT_EQ(plan.kind, departed_kind::lost);
    const auto r = result_in(plan.ops.back());
    EXPECT_EQ(plan.ops.back().path, l.result(bundle));
    ASSERT_EQ(r.bundle.size(), 5U);
    EXPECT_EQ(r.bundle[0], entry(task_state::succeeded, {}, 10)) << "its own outcome";
    EXPECT_EQ(r.bundle[1].state, task_state::lost);
    ASSERT_TRUE(r.bundle[1].error);
    EXPECT_EQ(r.bundle[1].error->code, codes::attempts_exhausted);
    EXPECT_EQ(r.bundle[2], entry(task_state::cancelled, "cancelled"));
    EXPECT_EQ(r.bundle[3], entry(task_state::failed, "bad_args"));
    EXPECT_EQ(r.bundle[4].state, task_state::lost);
    // The top level sums them up as a worker's result does (§5.1), with the tries so far.
    EXPECT_EQ(r.state, task_state::failed);
    EXPECT_EQ(r.error, (task_error{"handler_error", "4 of 5 tasks of the bundle did not succeed"}));
    EXPECT_EQ(r.attempt, 3);
    EXPECT_EQ(r.try_number, 2);
    EXPECT_EQ(r.errors.size(), 1U);
    EXPECT_TRUE(r.worker.empty());
    // What each task's caller sees.
    EXPECT_EQ(task_state_of(r, 0), task_state::succeeded);
    EXPECT_EQ(task_state_of(r, 1), task_state::lost);
    EXPECT_EQ(task_state_of(r, 3), task_state::failed);
}

TEST(BundleMasterResult, ACancelledOrMalformedRetryKeepsThemToo) {
    const layout l;
    const auto cancel = departed_ops(l, "w1", bundle, second_try_held(1), true, 90'000);
    ASSERT_EQ(cancel.kind, departed_kind::cancel);
    const auto c = result_in(cancel.ops.back());
    ASSERT_EQ(c.bundle.size(), 5U);
    EXPECT_EQ(c.bundle[0].state, task_state::succeeded);
    EXPECT_EQ(c.bundle[1].state, task_state::cancelled);
    EXPECT_EQ(c.bundle[4].state, task_state::cancelled);
    EXPECT_EQ(c.bundle[3].state, task_state::failed);

    // A node that no longer decodes as a task, whose `finished` still reads: those stand.
    auto o = boost::json::parse(second_try_held(1)).as_object();
    o["type"] = 5;  // no type name
    const auto bad = departed_ops(l, "w1", bundle, boost::json::serialize(o), false, 90'000);
    ASSERT_EQ(bad.kind, departed_kind::malformed);
    const auto m = result_in(bad.ops.back());
    ASSERT_EQ(m.bundle.size(), 5U);
    EXPECT_EQ(m.bundle[0].state, task_state::succeeded);
    ASSERT_TRUE(m.bundle[1].error);
    EXPECT_EQ(m.bundle[1].error->code, codes::malformed_task);
}

TEST(BundleMasterResult, ADelayedRetryCancelledWholeKeepsTheTasksAnEarlierTryFinished) {
    const layout l;
    const auto plan = plan_bundle_retry(assigned(2), first_try(), summary, 50'000, no_retries, 7);
    ASSERT_TRUE(plan);
    const auto ops = cancel_delayed_ops(l, bundle, 1, 60'000, plan->data);
    ASSERT_EQ(ops.size(), 3U);
    EXPECT_EQ(ops[0], txn_op::remove(l.delayed_task(bundle)));
    const auto r = result_in(ops[1]);
    ASSERT_EQ(r.bundle.size(), 5U);
    EXPECT_EQ(r.bundle[0], entry(task_state::succeeded, {}, 10));
    EXPECT_EQ(r.bundle[1].state, task_state::cancelled);
    EXPECT_EQ(r.bundle[3], entry(task_state::failed, "bad_args"));
    EXPECT_EQ(r.try_number, 2);
    // Not read: every task's result, as before.
    const auto blind = result_in(cancel_delayed_ops(l, bundle, 1, 60'000)[1]);
    EXPECT_TRUE(blind.bundle.empty());
    EXPECT_EQ(blind.state, task_state::cancelled);
}

TEST(BundleMasterResult, EveryTaskStillOpenOrNoRetryMeansOneResultForAll) {
    const layout l;
    // A first try: no `finished`, the result is every task's (no entries).
    auto o = boost::json::parse(assigned(2)).as_object();
    o["attempt"] = 3;
    const auto first = departed_ops(l, "w1", bundle, boost::json::serialize(o), false, 1);
    ASSERT_EQ(first.kind, departed_kind::lost);
    const auto r = result_in(first.ops.back());
    EXPECT_TRUE(r.bundle.empty());
    EXPECT_EQ(r.state, task_state::lost);
    EXPECT_EQ(r.try_number, 0);
    // Every entry null: the same.
    EXPECT_TRUE(close_bundle(
                    R"({"finished":[null,null,null,null,null]})", 5, task_state::lost,
                    task_error{"attempts_exhausted", "m"}
    )
                    .empty());
    // Entries all ending one way: that state at the top, the first entry's error.
    auto same = close_bundle(
        R"({"finished":[{"state":"cancelled","error":{"code":"cancelled","message":"one"}},null]})",
        2, task_state::cancelled, task_error{"cancelled", "cancelled"}
    );
    ASSERT_EQ(same.size(), 2U);
    task_result whole;
    whole.bundle = same;
    summarize_bundle(whole);
    EXPECT_EQ(whole.state, task_state::cancelled);
    EXPECT_EQ(whole.error, (task_error{"cancelled", "one"}));
}

TEST(BundleMasterResult, AFinishedFieldThatIsNotOursMeansOneResultForAll) {
    // A node someone else wrote: its `finished` is not trusted for any task, and the master's
    // result is every task's, as for a first try.
    const task_error lost{"attempts_exhausted", "m"};
    for (const char* garbage :
         {"{", "[]", R"({"finished":7})", R"({"finished":[null]})", R"({"finished":[1,null]})",
          R"({"finished":[{"state":"bogus"},null]})", R"({"finished":["x",{}]})"}) {
        EXPECT_TRUE(close_bundle(garbage, 2, task_state::lost, lost).empty()) << garbage;
    }
    const auto r = decode_result(master_result(
        bundle, "attempts_exhausted", "m", 3, task_state::lost, 1, R"({"finished":[1,2,3,4,5]})"
    ));
    ASSERT_TRUE(r);
    EXPECT_TRUE(r->bundle.empty());
    EXPECT_EQ(r->state, task_state::lost);
}

TEST(BundleMasterResult, APlainRetryCarriesItsTriesInTheMastersResult) {
    const layout l;
    const std::string plain = "t4-1763733600123-3fa9c2d1000002";
    const auto node =
        R"({"v":1,"type":"sh","args":1,"attempt":3,"try":3,"errors":[{"try":1},{"try":2}]})";
    const auto plan = departed_ops(l, "w1", plain, node, false, 1);
    ASSERT_EQ(plan.kind, departed_kind::lost);
    const auto r = result_in(plan.ops.back());
    EXPECT_EQ(r.try_number, 3);
    EXPECT_EQ(r.errors.size(), 2U);
    EXPECT_TRUE(r.bundle.empty());
}

}  // namespace ZKD_UNITY_ID
