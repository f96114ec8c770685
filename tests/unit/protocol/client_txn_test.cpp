// SPDX-License-Identifier: MIT
// The client's transactions (docs/protocol.md §6 T1 with its receipt, T5 for a result and for
// a bundle's result): the ops each builds and what each reads out of the per-op results.
#include "protocol/client_txn.hpp"

#include "protocol/ids.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;

namespace {

const std::string tid = "t4-1763733600123-3fa9c2d100002a";

layout test_layout() {
    layout l;
    l.pending_shards = 4;
    l.result_shards = 4;
    return l;
}

txn_answer one(op_code c) {
    return {true, {c}};
}

task_result bundle_result(
    std::vector<std::size_t> consumed, std::vector<std::size_t> published = {}
) {
    task_result r;
    r.task = "b3-" + tid;
    r.state = task_state::succeeded;
    r.value = 1;
    r.consumed = std::move(consumed);
    r.published = std::move(published);
    return r;
}

// A bundle's result with one entry per task (task k's value k).
task_result entries(std::size_t n, std::vector<std::size_t> published = {}) {
    task_result r;
    r.task = tid + "_" + std::to_string(n);
    for (std::size_t k = 0; k < n; ++k) {
        task_result e;
        e.value = static_cast<std::int64_t>(k);
        r.bundle.push_back(e);
    }
    summarize_bundle(r);
    r.published = std::move(published);
    return r;
}

}  // namespace

TEST(ProtocolClientTxn, SubmitCreatesThePendingNode) {
    const auto l = test_layout();
    EXPECT_EQ(submit_op(l, tid, "T"), txn_op::create(l.pending_task(tid), "T"));
    EXPECT_EQ(read_submit({false, {op_code::ok}}), submit_outcome::submitted);
    EXPECT_EQ(read_submit(one(op_code::node_exists)), submit_outcome::exists);
    EXPECT_EQ(read_submit(one(op_code::no_node)), submit_outcome::failed);
    EXPECT_EQ(read_submit({true, {}}), submit_outcome::unknown);
}

TEST(ProtocolClientTxn, ADirectSubmitChecksTheWorkersNodeAndCreatesTheAssignment) {
    EXPECT_EQ(
        direct_submit_ops("w-1", 3, tid, "T"),
        (std::vector<txn_op>{
            txn_op::check("/workers/w-1", 3), txn_op::create("/assign/w-1/" + tid, "T")})
    );
    EXPECT_EQ(read_direct_submit({false, {op_code::ok, op_code::ok}}), submit_outcome::submitted);
    // The worker left, changed (draining), or its directory is gone: to pending instead.
    EXPECT_FALSE(read_direct_submit({true, {op_code::no_node, op_code::not_run}}));
    EXPECT_FALSE(read_direct_submit({true, {op_code::bad_version, op_code::not_run}}));
    EXPECT_FALSE(read_direct_submit({true, {op_code::ok, op_code::no_node}}));
    EXPECT_EQ(
        read_direct_submit({true, {op_code::ok, op_code::node_exists}}), submit_outcome::exists
    );
    EXPECT_EQ(read_direct_submit({true, {op_code::ok, op_code::other}}), submit_outcome::failed);
    EXPECT_EQ(read_direct_submit({true, {}}), submit_outcome::unknown);
}

TEST(ProtocolClientTxn, ADirectAssignmentIsTheTaskWithItsWorkerAndNoEpoch) {
    task_spec t;
    t.type = "echo";
    t.args = "x";
    t.submitted_ms = 1763733600123;
    t.client = "3fa9c2d1";
    // What the client stamps on a task it places directly (§6 T1): no attempt, no epoch.
    const auto data = stamp(encode(t), assignment{0, 0, 1763733600200, "host-7-\"q\""});
    ASSERT_TRUE(data);
    EXPECT_EQ(
        *data, R"({"v":1,"type":"echo","args":"x","priority":5,"timeout_ms":0,"max_attempts":3,)"
               R"("submitted_ms":1763733600123,"client":"3fa9c2d1","assigned_ms":1763733600200,)"
               R"("worker":"host-7-\"q\""})"
    );
    const auto decoded = decode_task_node(*data);
    ASSERT_TRUE(decoded) << *data;
    EXPECT_EQ(decoded->task, t);
    // Escaped in the JSON, whatever a name holds; readers take the attempt as 1.
    EXPECT_EQ(decoded->assigned, (assignment{1, 0, 1763733600200, "host-7-\"q\""}));
}

TEST(ProtocolClientTxn, TheReceiptIsCreatedOnceThenSet) {
    EXPECT_EQ(receipt_name(0x1234abcdULL, "3fa9c2d1"), "000000001234abcd-3fa9c2d1");
    EXPECT_EQ(receipt_name(~0ULL, "x"), "ffffffffffffffff-x");
    EXPECT_EQ(receipt_op("/receipts/a-0", 7, false), txn_op::create("/receipts/a-0", "7", true));
    EXPECT_EQ(receipt_op("/receipts/a-0", 8, true), txn_op::set("/receipts/a-0", "8"));
    EXPECT_TRUE(receipt_shows("8", 8));
    EXPECT_FALSE(receipt_shows("7", 8));
    EXPECT_FALSE(receipt_shows("", 8));
}

TEST(ProtocolClientTxn, TheReceiptsOwnFailureSaysWhatIsWrongWithItsSlot) {
    EXPECT_EQ(read_receipt(op_code::ok), receipt_outcome::written);
    EXPECT_EQ(read_receipt(op_code::node_exists), receipt_outcome::slot_exists);
    EXPECT_EQ(read_receipt(op_code::no_node), receipt_outcome::slot_missing);
    EXPECT_EQ(read_receipt(op_code::other), receipt_outcome::broken);
}

TEST(ProtocolClientTxn, ConsumeDeletesTheResultAndAMissingOneIsConsumed) {
    EXPECT_EQ(consume_op("/results/r1/x"), txn_op::remove("/results/r1/x"));
    EXPECT_EQ(read_consume({false, {op_code::ok}}), consume_outcome::consumed);
    EXPECT_EQ(read_consume(one(op_code::no_node)), consume_outcome::consumed);
    EXPECT_EQ(read_consume(one(op_code::not_empty)), consume_outcome::foreign_below);
    EXPECT_EQ(read_consume(one(op_code::other)), consume_outcome::failed);
    EXPECT_EQ(read_consume({true, {}}), consume_outcome::unknown);
}

TEST(ProtocolClientTxn, ABundleConsumeMarksItsTasksAtTheVersionRead) {
    const auto plan = bundle_consume_ops("/results/r1/b", bundle_result({0}), 4, 3, {2, 0});
    EXPECT_FALSE(plan.all);
    EXPECT_EQ(plan.marked, (std::vector<std::size_t>{0, 2}));
    EXPECT_EQ(plan.taken, (std::vector<std::size_t>{0}));  // someone consumed task 0 first
    ASSERT_EQ(plan.ops.size(), 1U);
    EXPECT_EQ(plan.ops[0].what, txn_op::kind::set);
    EXPECT_EQ(plan.ops[0].version, 4);
    auto written = decode_result(plan.ops[0].data);
    ASSERT_TRUE(written);
    EXPECT_EQ(written->consumed, (std::vector<std::size_t>{0, 2}));
}

TEST(ProtocolClientTxn, TheLastConsumeOfABundleDeletesItsResult) {
    const auto plan = bundle_consume_ops("/results/r1/b", bundle_result({0, 2}), 9, 3, {1});
    EXPECT_TRUE(plan.all);
    EXPECT_TRUE(plan.taken.empty());
    ASSERT_EQ(plan.ops.size(), 1U);
    EXPECT_EQ(plan.ops[0], txn_op::remove("/results/r1/b", 9));
}

TEST(ProtocolClientTxn, ABundleWhoseOtherTasksArePublishedIsWhollyConsumedByTheRest) {
    EXPECT_TRUE(bundle_wholly_consumed({0, 1, 2}, {}, 3));
    EXPECT_FALSE(bundle_wholly_consumed({0, 2}, {}, 3));
    EXPECT_TRUE(bundle_wholly_consumed({2}, {0, 1}, 3));
    EXPECT_TRUE(bundle_wholly_consumed({}, {0, 1, 2}, 3));
    EXPECT_FALSE(bundle_wholly_consumed({1}, {0}, 3));

    // Task 1 consumed, tasks 0 and 2 published: the consume of task 1 deletes the node.
    const auto last = bundle_consume_ops("/results/r1/b", bundle_result({}, {0, 2}), 5, 3, {1});
    EXPECT_TRUE(last.all);
    ASSERT_EQ(last.ops.size(), 1U);
    EXPECT_EQ(last.ops[0], txn_op::remove("/results/r1/b", 5));

    // A published task's consume is its own node's: nothing marked in the bundle's.
    const auto mixed = bundle_consume_ops("/results/r1/b", bundle_result({}, {0}), 6, 3, {0, 2});
    EXPECT_FALSE(mixed.all);
    EXPECT_EQ(mixed.published, (std::vector<std::size_t>{0}));
    EXPECT_EQ(mixed.marked, (std::vector<std::size_t>{2}));
    ASSERT_EQ(mixed.ops.size(), 1U);
    const auto written = decode_result(mixed.ops[0].data);
    ASSERT_TRUE(written);
    EXPECT_EQ(written->consumed, (std::vector<std::size_t>{2}));
    EXPECT_EQ(written->published, (std::vector<std::size_t>{0}));  // kept

    // Only published (or taken) tasks asked for: no write.
    const auto none = bundle_consume_ops("/results/r1/b", bundle_result({1}, {0}), 7, 3, {0, 1});
    EXPECT_TRUE(none.ops.empty());
    EXPECT_FALSE(none.all);
    EXPECT_EQ(none.taken, (std::vector<std::size_t>{1}));
    EXPECT_EQ(none.published, (std::vector<std::size_t>{0}));
}

TEST(ProtocolClientTxn, ATasksOwnResultNodeIsItsIdInTheBundlesDirectory) {
    const auto l = test_layout();
    const auto bundle = tid + "_3";
    EXPECT_EQ(entry_result_path(l, bundle, 2), "/results/3fa9c2d1/" + bundle + ".2");
    EXPECT_EQ(
        entry_result_path(l, bundle, 0), l.result_dir(bundle) + "/" + bundled_task_id(bundle, 0)
    );
}

TEST(ProtocolClientTxn, ABundlesResultDeliversOnlyWhatIsNeitherPublishedNorConsumed) {
    auto whole = entries(4, {1});
    whole.consumed = {3};
    EXPECT_EQ(deliverable_entries(whole, 4), (std::vector<std::size_t>{0, 2}));
    EXPECT_TRUE(is_published(whole, 1));
    EXPECT_FALSE(is_published(whole, 0));
    EXPECT_EQ(deliverable_entries(entries(2), 2), (std::vector<std::size_t>{0, 1}));
}

TEST(ProtocolClientTxn, ATasksResultIsItsOwnNodesFirstThenItsEntryUnlessPublished) {
    const auto whole = entries(3, {1});
    EXPECT_EQ(locate_entry(true, &whole, 0), entry_source::own);
    EXPECT_EQ(locate_entry(true, nullptr, 1), entry_source::own);  // the bundle still runs
    EXPECT_EQ(locate_entry(false, nullptr, 1), entry_source::none);
    EXPECT_EQ(locate_entry(false, &whole, 0), entry_source::bundle);
    EXPECT_EQ(locate_entry(false, &whole, 1), entry_source::consumed);  // own node gone
    auto consumed = whole;
    consumed.consumed = {0};
    EXPECT_EQ(locate_entry(false, &consumed, 0), entry_source::consumed);

    const auto id = tid + "_3.1";
    task_result own;
    own.task = id;
    own.value = 41;
    own.worker = "w";
    auto r = entry_result(own, whole, 1, id);
    ASSERT_TRUE(r);
    ASSERT_TRUE(*r);
    EXPECT_EQ((*r)->value, 41);  // not the bundle's entry (1)
    EXPECT_EQ((*r)->worker, "w");

    r = entry_result(std::nullopt, whole, 1, id);  // published, own node consumed
    ASSERT_TRUE(r);
    EXPECT_FALSE(*r);

    r = entry_result(std::nullopt, whole, 2, tid + "_3.2");
    ASSERT_TRUE(r);
    ASSERT_TRUE(*r);
    EXPECT_EQ((*r)->value, 2);
    EXPECT_EQ((*r)->task, tid + "_3.2");

    r = entry_result(std::nullopt, std::nullopt, 2, tid + "_3.2");  // still running
    ASSERT_TRUE(r);
    EXPECT_FALSE(*r);

    auto short_one = entries(2);
    EXPECT_FALSE(entry_result(std::nullopt, short_one, 2, "x"));  // no entry for task 2
}

TEST(ProtocolClientTxn, BundleConsumeOutcomes) {
    EXPECT_EQ(read_bundle_consume({false, {op_code::ok}}), bundle_consume_outcome::committed);
    EXPECT_EQ(read_bundle_consume(one(op_code::bad_version)), bundle_consume_outcome::conflict);
    EXPECT_EQ(read_bundle_consume(one(op_code::no_node)), bundle_consume_outcome::conflict);
    EXPECT_EQ(read_bundle_consume(one(op_code::other)), bundle_consume_outcome::failed);
    EXPECT_EQ(read_bundle_consume({true, {}}), bundle_consume_outcome::unknown);
}

}  // namespace ZKD_UNITY_ID
