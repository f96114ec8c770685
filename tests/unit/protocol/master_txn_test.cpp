// SPDX-License-Identifier: MIT
// The master's transactions (docs/protocol.md §6 T2, T6, T7, T8; §8): the ops each builds
// and what each reads out of the per-op results.
#include "protocol/master_txn.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;

namespace {

const std::string tid = "t4-1763733600123-3fa9c2d100002a";
constexpr std::int64_t now = 1763733600999;

layout test_layout() {
    layout l;
    l.pending_shards = 4;
    l.result_shards = 4;
    return l;
}

task_node sample_task(int attempt = 1, int max_attempts = 3) {
    task_node n;
    n.task.type = "echo";
    n.task.args = "hi";
    n.assigned.attempt = attempt;
    n.task.max_attempts = max_attempts;
    n.task.submitted_ms = 1763733600123;
    return n;
}

txn_answer failed_at(std::size_t n, std::size_t i, op_code c) {
    txn_answer a{true, std::vector<op_code>(n, op_code::not_run)};
    for (std::size_t k = 0; k < i; ++k) {
        a.per_op[k] = op_code::ok;
    }
    a.per_op[i] = c;
    return a;
}

task_result result_of(const txn_op& op) {
    EXPECT_EQ(op.what, txn_op::kind::create);
    auto r = decode_result(op.data);
    EXPECT_TRUE(r) << op.data;
    return r ? *r : task_result{};
}

}  // namespace

TEST(ProtocolMasterTxn, AssignChecksTheWorkerMovesThePendingNodeAndStampsTheAssignment) {
    const auto pending = encode(sample_task(2));
    const auto assign = assign_ops(2, tid, "w1", pending, 2, 7, now);
    ASSERT_TRUE(assign);
    const auto& ops = *assign;
    ASSERT_EQ(ops.size(), 3U);
    EXPECT_EQ(ops[0], txn_op::check("/workers/w1"));
    EXPECT_EQ(ops[1], txn_op::remove(layout::pending_shard(2) + "/" + tid));
    EXPECT_EQ(ops[2].what, txn_op::kind::create);
    EXPECT_EQ(ops[2].path, layout::assignment("w1", tid));
    EXPECT_FALSE(ops[2].ephemeral);
    auto assigned = decode_task_node(ops[2].data);
    ASSERT_TRUE(assigned);
    EXPECT_EQ(assigned->assigned, (assignment{2, 7, now, "w1"}));  // T6 counts attempts, not T2
    EXPECT_EQ(assigned->task, sample_task(2).task);
    // The pending node's bytes with the assignment spliced in: what encode() writes of it.
    auto expected = sample_task(2);
    expected.assigned = assignment{2, 7, now, "w1"};
    EXPECT_EQ(ops[2].data, encode(expected));
    EXPECT_FALSE(assign_ops(2, tid, "w1", "not a task", 1, 7, now));
}

TEST(ProtocolMasterTxn, AssignOutcomesNameTheFailedOp) {
    EXPECT_EQ(
        read_assign({false, {op_code::ok, op_code::ok, op_code::ok}}), assign_outcome::committed
    );
    EXPECT_EQ(read_assign(failed_at(3, 0, op_code::no_node)), assign_outcome::worker_left);
    EXPECT_EQ(read_assign(failed_at(3, 1, op_code::no_node)), assign_outcome::task_gone);
    EXPECT_EQ(read_assign(failed_at(3, 1, op_code::not_empty)), assign_outcome::foreign_below);
    EXPECT_EQ(read_assign(failed_at(3, 2, op_code::node_exists)), assign_outcome::task_gone);
    EXPECT_EQ(read_assign(failed_at(3, 2, op_code::no_node)), assign_outcome::worker_dir_gone);
    EXPECT_EQ(read_assign(failed_at(3, 1, op_code::other)), assign_outcome::failed);
    EXPECT_EQ(read_assign({true, {}}), assign_outcome::unknown);
}

TEST(ProtocolMasterTxn, RejectDeletesThePendingNodeAndWritesAFailedResultWithItsAttempt) {
    const auto l = test_layout();
    const auto ops = reject_ops(l, 1, tid, codes::unknown_type, "no worker serves 'x'", 2, now);
    ASSERT_EQ(ops.size(), 2U);
    EXPECT_EQ(ops[0], txn_op::remove(layout::pending_shard(1) + "/" + tid));
    EXPECT_EQ(ops[1].path, l.result(tid));
    const auto r = result_of(ops[1]);
    EXPECT_EQ(r.state, task_state::failed);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->code, codes::unknown_type);
    EXPECT_EQ(r.error->message, "no worker serves 'x'");
    EXPECT_EQ(r.attempt, 2);
    EXPECT_EQ(r.finished_ms, now);
    EXPECT_EQ(r.task, tid);

    EXPECT_EQ(read_reject({false, {op_code::ok, op_code::ok}}), pending_outcome::committed);
    EXPECT_EQ(read_reject(failed_at(2, 0, op_code::no_node)), pending_outcome::task_gone);
    EXPECT_EQ(read_reject(failed_at(2, 0, op_code::not_empty)), pending_outcome::foreign_below);
    EXPECT_EQ(read_reject(failed_at(2, 1, op_code::node_exists)), pending_outcome::failed);
    EXPECT_EQ(read_reject({true, {}}), pending_outcome::failed);
}

TEST(ProtocolMasterTxn, CancelHasThreeFormsEachDeletingTheRequest) {
    const auto l = test_layout();
    const auto pending = cancel_pending_ops(l, 3, tid, 1, now);
    ASSERT_EQ(pending.size(), 3U);
    EXPECT_EQ(pending[0], txn_op::remove(layout::pending_shard(3) + "/" + tid));
    EXPECT_EQ(result_of(pending[1]).state, task_state::cancelled);
    EXPECT_EQ(pending[2], txn_op::remove(layout::cancel_request(tid)));

    const auto assigned = cancel_assigned_ops("w2", tid);
    ASSERT_EQ(assigned.size(), 3U);
    EXPECT_EQ(assigned[0], txn_op::check(layout::assignment("w2", tid)));
    EXPECT_EQ(assigned[1], txn_op::create(layout::cancel_marker("w2", tid), ""));
    EXPECT_EQ(assigned[2], txn_op::remove(layout::cancel_request(tid)));

    EXPECT_EQ(
        drop_cancel_ops(tid), std::vector<txn_op>{txn_op::remove(layout::cancel_request(tid))}
    );

    EXPECT_EQ(read_cancel({false, {op_code::ok}}), pending_outcome::committed);
    EXPECT_EQ(read_cancel(failed_at(3, 0, op_code::not_empty)), pending_outcome::foreign_below);
    EXPECT_EQ(read_cancel(failed_at(3, 0, op_code::no_node)), pending_outcome::task_gone);
    EXPECT_EQ(read_cancel(failed_at(3, 1, op_code::node_exists)), pending_outcome::failed);
    EXPECT_EQ(read_cancel({true, {}}), pending_outcome::failed);
}

TEST(ProtocolMasterTxn, DepartedTaskWithAttemptsLeftGoesBackToPendingWithTheNextAttempt) {
    const auto l = test_layout();
    auto held = sample_task(1, 3);
    held.assigned = assignment{1, 4, 5, "w1"};
    held.run = progress{6, 0.5, "half", 7};
    const auto plan = departed_ops(l, "w1", tid, encode(held), false, now);
    EXPECT_EQ(plan.kind, departed_kind::requeue);
    EXPECT_EQ(plan.attempt, 1);
    ASSERT_EQ(plan.ops.size(), 2U);
    EXPECT_EQ(plan.ops[0], txn_op::remove(layout::assignment("w1", tid)));
    EXPECT_EQ(plan.ops[1].path, l.pending_task(tid));
    auto again = decode_task_node(plan.ops[1].data);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->assigned, (assignment{2, 0, 0, {}}));
    EXPECT_EQ(again->run, progress{});  // nothing of the run either
    EXPECT_EQ(again->task, held.task);
    EXPECT_EQ(plan.ops[1].data, encode(sample_task(2, 3)));
}

TEST(ProtocolMasterTxn, DepartedPoisonTaskEndsLostOnceItsAttemptsAreUsed) {
    const auto l = test_layout();
    const auto plan = departed_ops(l, "w1", tid, encode(sample_task(3, 3)), false, now);
    EXPECT_EQ(plan.kind, departed_kind::lost);
    ASSERT_EQ(plan.ops.size(), 2U);
    EXPECT_EQ(plan.ops[1].path, l.result(tid));
    const auto r = result_of(plan.ops[1]);
    EXPECT_EQ(r.state, task_state::lost);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->code, codes::attempts_exhausted);
    EXPECT_EQ(r.attempt, 3);
}

TEST(ProtocolMasterTxn, DepartedTaskWithACancelMarkerEndsCancelledAndTheMarkerGoes) {
    const auto l = test_layout();
    // Even with attempts exhausted: the cancel wins over lost.
    const auto plan = departed_ops(l, "w1", tid, encode(sample_task(3, 3)), true, now);
    EXPECT_EQ(plan.kind, departed_kind::cancel);
    ASSERT_EQ(plan.ops.size(), 3U);
    EXPECT_EQ(plan.ops[1], txn_op::remove(layout::cancel_marker("w1", tid)));
    EXPECT_EQ(result_of(plan.ops[2]).state, task_state::cancelled);
}

TEST(ProtocolMasterTxn, DepartedGarbageEndsInAMalformedResult) {
    const auto l = test_layout();
    const auto plan = departed_ops(l, "w1", tid, "{not json", false, now);
    EXPECT_EQ(plan.kind, departed_kind::malformed);
    EXPECT_EQ(plan.attempt, 0);
    ASSERT_EQ(plan.ops.size(), 2U);
    const auto r = result_of(plan.ops[1]);
    EXPECT_EQ(r.state, task_state::failed);
    ASSERT_TRUE(r.error);
    EXPECT_EQ(r.error->code, codes::malformed_task);
    EXPECT_FALSE(r.error->message.empty());

    EXPECT_EQ(read_departed({false, {op_code::ok, op_code::ok}}), departed_outcome::committed);
    EXPECT_EQ(read_departed(failed_at(2, 0, op_code::not_empty)), departed_outcome::foreign_below);
    EXPECT_EQ(read_departed(failed_at(2, 0, op_code::no_node)), departed_outcome::failed);
    EXPECT_EQ(read_departed(failed_at(2, 1, op_code::node_exists)), departed_outcome::failed);
}

TEST(ProtocolMasterTxn, MasterNodeIsRecreatedEphemeralAfterTheForeignOneGoes) {
    member_info node;
    node.id = "m1";
    node.epoch = 3;
    const auto fresh = master_node_ops(node, false, -1);
    ASSERT_EQ(fresh.size(), 1U);
    EXPECT_EQ(fresh[0].path, layout::master());
    EXPECT_TRUE(fresh[0].ephemeral);
    const auto replaced = master_node_ops(node, true, 4);
    ASSERT_EQ(replaced.size(), 2U);
    EXPECT_EQ(replaced[0], txn_op::remove(layout::master(), 4));
    EXPECT_EQ(replaced[1], fresh[0]);
    EXPECT_EQ(master_report_ops(node)[0].what, txn_op::kind::set);
    // What the master checks its node for: the fields clients and operators rely on.
    node.max_pending = 5;
    EXPECT_TRUE(master_node_says(node, encode(node)));
    auto reported = node;
    reported.throughput = 12.5;  // a report still on its way: fine
    EXPECT_TRUE(master_node_says(node, encode(reported)));
    EXPECT_FALSE(master_node_says(node, "\xff garbage"));
    EXPECT_FALSE(master_node_says(node, ""));
    auto other = node;
    other.max_pending = 0;  // someone lifted the bound
    EXPECT_FALSE(master_node_says(node, encode(other)));
    other = node;
    other.epoch = 4;
    EXPECT_FALSE(master_node_says(node, encode(other)));
    other = node;
    other.id = "m2";
    EXPECT_FALSE(master_node_says(node, encode(other)));
    other = node;
    other.direct = false;  // someone turned direct placement off
    EXPECT_FALSE(master_node_says(node, encode(other)));
    EXPECT_EQ(
        remove_departed_dir_ops("w1"), std::vector<txn_op>{txn_op::remove(layout::assign_dir("w1"))}
    );
    EXPECT_EQ(
        remove_marker_ops("w1", tid),
        std::vector<txn_op>{txn_op::remove(layout::cancel_marker("w1", tid))}
    );
    EXPECT_EQ(collect_ops("/results/00/x"), std::vector<txn_op>{txn_op::remove("/results/00/x")});
}

TEST(ProtocolMasterTxn, CollectDirDeletesAnEmptyClientDirectoryAtTheVersionSeen) {
    const auto dir = layout::client_results("0123abcd");
    const auto ops = collect_dir_ops(dir, 7);
    ASSERT_EQ(ops.size(), 1U);
    EXPECT_EQ(ops[0].what, txn_op::kind::remove);
    EXPECT_EQ(ops[0].path, "/results/0123abcd");
    EXPECT_EQ(ops[0].version, 7);  // never -1: a directory written since is kept
    EXPECT_EQ(ops, std::vector<txn_op>{txn_op::remove(dir, 7)});
}

}  // namespace ZKD_UNITY_ID
