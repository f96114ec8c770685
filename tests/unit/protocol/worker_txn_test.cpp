// SPDX-License-Identifier: MIT
// The worker's transactions (docs/protocol.md §6 T3, T4, T9): the ops each builds and what
// each reads out of the per-op results.
#include "protocol/worker_txn.hpp"

#include <gtest/gtest.h>

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

txn_answer failed_at(std::size_t n, std::size_t i, op_code c) {
    txn_answer a{true, std::vector<op_code>(n, op_code::not_run)};
    for (std::size_t k = 0; k < i; ++k) {
        a.per_op[k] = op_code::ok;
    }
    a.per_op[i] = c;
    return a;
}

const publish_form fenced{true, false, true};
const publish_form fenced_marked{true, true, true};
const publish_form checked{false, false, true};

}  // namespace

TEST(ProtocolWorkerTxn, RunningMarkSetsTheAssignmentAtTheVersionLastWritten) {
    task_node n;
    n.task.type = "echo";
    n.task.args = "x";
    n.assigned = assignment{1, 2, 3, "w1"};
    const progress run{1763733600999, 0.5, "half", 1763733601000};
    const auto op = running_mark_op("w1", tid, encode(n), run, 3);
    ASSERT_TRUE(op);
    EXPECT_EQ(op->what, txn_op::kind::set);
    EXPECT_EQ(op->path, layout::assignment("w1", tid));
    EXPECT_EQ(op->version, 3);
    n.run = run;
    EXPECT_EQ(op->data, encode(n));
    EXPECT_FALSE(running_mark_op("w1", tid, "[]", run, 3));
    EXPECT_EQ(read_mark(false), mark_outcome::written);
    EXPECT_EQ(read_mark(true), mark_outcome::gave_up);
}

TEST(ProtocolWorkerTxn, PublishDeletesTheAssignmentThenTheMarkerThenCreatesTheResult) {
    const auto l = test_layout();
    const auto ops = publish_ops(l, "w1", tid, "R", fenced_marked);
    ASSERT_EQ(ops.size(), 3U);
    EXPECT_EQ(ops[0], txn_op::remove(layout::assignment("w1", tid)));
    EXPECT_EQ(ops[1], txn_op::remove(layout::cancel_marker("w1", tid)));
    EXPECT_EQ(ops[2], txn_op::create(l.result(tid), "R"));

    EXPECT_EQ(publish_ops(l, "w1", tid, "R", fenced).size(), 2U);
    const auto deletes = publish_ops(l, "w1", tid, "R", {true, true, false});
    ASSERT_EQ(deletes.size(), 2U);
    EXPECT_EQ(deletes[1], txn_op::remove(layout::cancel_marker("w1", tid)));
}

TEST(ProtocolWorkerTxn, PublishWithoutItsAssignmentChecksTheWorkersNode) {
    const auto l = test_layout();
    const auto ops = publish_ops(l, "w1", tid, "R", {false, true, true});
    ASSERT_EQ(ops.size(), 2U);  // no marker without the assignment
    EXPECT_EQ(ops[0], txn_op::check(layout::worker("w1")));
    EXPECT_EQ(ops[1], txn_op::create(l.result(tid), "R"));
}

TEST(ProtocolWorkerTxn, PublishOutcomesNameTheFailedOp) {
    EXPECT_EQ(
        read_publish({false, {op_code::ok, op_code::ok}}, fenced), publish_outcome::committed
    );
    EXPECT_EQ(
        read_publish(failed_at(2, 0, op_code::no_node), fenced), publish_outcome::assignment_gone
    );
    EXPECT_EQ(
        read_publish(failed_at(2, 0, op_code::not_empty), fenced), publish_outcome::foreign_below
    );
    EXPECT_EQ(
        read_publish(failed_at(2, 1, op_code::node_exists), fenced), publish_outcome::result_exists
    );
    EXPECT_EQ(
        read_publish(failed_at(3, 1, op_code::no_node), fenced_marked), publish_outcome::marker_gone
    );
    EXPECT_EQ(
        read_publish(failed_at(3, 2, op_code::node_exists), fenced_marked),
        publish_outcome::result_exists
    );
    EXPECT_EQ(
        read_publish(failed_at(2, 0, op_code::no_node), checked), publish_outcome::worker_gone
    );
    EXPECT_EQ(
        read_publish(failed_at(2, 1, op_code::node_exists), checked), publish_outcome::result_exists
    );
    EXPECT_EQ(read_publish(failed_at(2, 1, op_code::other), fenced), publish_outcome::failed);
    EXPECT_EQ(read_publish({true, {}}, fenced), publish_outcome::unknown);
    // Results of another shape than the form's: the outcome cannot be read.
    EXPECT_EQ(
        read_publish(failed_at(2, 0, op_code::no_node), fenced_marked), publish_outcome::unknown
    );
}

TEST(ProtocolWorkerTxn, DrainSetsTheWorkersNodeDraining) {
    member_info me;
    me.id = "w1";
    me.host = "h";
    me.pid = 7;
    me.capacity = 2;
    me.started_ms = 1;
    const auto op = drain_op(me);
    EXPECT_EQ(op.what, txn_op::kind::set);
    EXPECT_EQ(op.path, layout::worker("w1"));
    EXPECT_EQ(op.version, -1);
    auto back = decode_worker(op.data);
    ASSERT_TRUE(back);
    EXPECT_TRUE(back->draining);
    EXPECT_EQ(back->capacity, 2);
}

}  // namespace ZKD_UNITY_ID
