// SPDX-License-Identifier: MIT
// A workflow's nodes and transactions, as ops (docs/protocol.md §11).
#include "workflow/txn.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::workflow;
using zkd::protocol::txn_op;

namespace {

constexpr workflow_ref ref{1'700'000'000'000, 0xabcdef01};
constexpr std::string_view id = "wf-1700000000000-abcdef01";

TEST(WorkflowTxn, Paths) {
    EXPECT_EQ(workflow_id(ref), id);
    EXPECT_EQ(workflow_node(id), "/workflows/wf-1700000000000-abcdef01");
    EXPECT_EQ(spec_chunk_node(id, 2), "/workflows/wf-1700000000000-abcdef01/spec-0002");
    EXPECT_EQ(state_node(id), "/workflows/wf-1700000000000-abcdef01/state");
    EXPECT_EQ(cancel_node(id), "/workflows/wf-1700000000000-abcdef01/cancel");
    EXPECT_EQ(results_node(ref), "/results/abcdef01");
}

TEST(WorkflowTxn, ASmallSpecIsOneTransaction) {
    const std::string spec = R"({"steps":{"a":{"type":"echo"}}})";
    const auto txns = submit_txns(ref, workflow_header{"n", 1, 0, 0, 5, "00000001"}, spec);
    ASSERT_EQ(txns.size(), 1U);
    ASSERT_EQ(txns[0].size(), 3U);
    EXPECT_EQ(txns[0][0], txn_op::create("/results/abcdef01", ""));
    const auto h = decode_header(txns[0][1].data);
    ASSERT_TRUE(h);
    EXPECT_EQ(h->chunks, 1U);
    EXPECT_EQ(h->spec_bytes, spec.size());
    EXPECT_EQ(txns[0][2], txn_op::create(spec_chunk_node(id, 0), spec));
}

TEST(WorkflowTxn, ALargeSpecGoesInSeveralTransactionsHeaderLast) {
    const std::string spec(spec_chunk_bytes * 7 + 1, 'x');
    const auto txns = submit_txns(ref, workflow_header{"", 1, 0, 0, 5, ""}, spec);
    ASSERT_EQ(txns.size(), 3U);
    EXPECT_EQ(txns[0][1], txn_op::create(workflow_node(id), ""));
    std::string joined;
    std::size_t chunks = 0;
    for (const auto& t : txns) {
        std::size_t bytes = 0;
        for (const auto& op : t) {
            bytes += op.data.size();
            if (op.path.find("/spec-") != std::string::npos) {
                EXPECT_EQ(op.path, spec_chunk_node(id, chunks));
                joined += op.data;
                ++chunks;
            }
        }
        EXPECT_LE(bytes, 900'000U);
    }
    EXPECT_EQ(chunks, 8U);
    EXPECT_EQ(joined, spec);
    const auto& last = txns.back().back();
    EXPECT_EQ(last.what, txn_op::kind::set);
    EXPECT_EQ(last.path, workflow_node(id));
    EXPECT_EQ(last.version, 0);
    EXPECT_EQ(decode_header(last.data)->chunks, 8U);
}

TEST(WorkflowTxn, LaunchIsFencedAndLogsEachShard) {
    zkd::protocol::layout l;
    wf_do::write w;
    w.version = 4;
    w.state = "{state}";
    for (std::uint64_t k = 0; k < 40; ++k) {
        w.creates.push_back({step_task_id(ref, 5, k), "{\"v\":1,\"type\":\"echo\"}"});
    }
    const auto ops = launch_ops(l, id, 7, w);
    EXPECT_EQ(ops[0], txn_op::check("/epoch", 7));
    EXPECT_EQ(ops[1], txn_op::set(state_node(id), "{state}", 4));
    std::size_t logged = 0;
    for (std::size_t i = 0; i < 40; ++i) {
        EXPECT_EQ(ops[2 + i].path, l.pending_task(w.creates[i].tid));
        EXPECT_EQ(ops[2 + i].what, txn_op::kind::create);
    }
    for (std::size_t i = 42; i < ops.size(); ++i) {
        EXPECT_EQ(ops[i].what, txn_op::kind::set);
        auto log = zkd::protocol::decode_change_log(ops[i].data);
        ASSERT_TRUE(log);
        for (const auto& e : log->created) {
            EXPECT_EQ(ops[i].path + "/" + e.name, l.pending_task(e.name));
            EXPECT_EQ(e.data, std::optional<std::string>("{\"v\":1,\"type\":\"echo\"}"));
        }
        logged += log->created.size();
    }
    EXPECT_EQ(logged, 40U);

    w.version.reset();
    EXPECT_EQ(launch_ops(l, id, 7, w)[1], txn_op::create(state_node(id), "{state}"));
}

TEST(WorkflowTxn, LaunchPlacesTasksOnWorkersFencedByTheirNodes) {
    zkd::protocol::layout l;
    wf_do::write w;
    w.version = 2;
    w.state = "{state}";
    for (std::uint64_t k = 0; k < 4; ++k) {
        w.creates.push_back({step_task_id(ref, 5, k), "{\"v\":1,\"type\":\"echo\"}"});
    }
    // 0 and 2 on worker a, 3 on worker b, 1 to pending.
    std::vector<std::optional<direct_target>> placed(4);
    placed[0] = direct_target{"a", 3, "{a0}"};
    placed[2] = direct_target{"a", 3, "{a2}"};
    placed[3] = direct_target{"b", 0, "{b3}"};
    const auto ops = launch_ops(l, id, 7, w, placed);
    const auto& t = w.creates;
    ASSERT_EQ(ops.size(), 11U);
    EXPECT_EQ(ops[0], txn_op::check("/epoch", 7));
    EXPECT_EQ(ops[1], txn_op::set(state_node(id), "{state}", 2));
    EXPECT_EQ(ops[2], txn_op::check("/workers/a", 3));
    EXPECT_EQ(ops[3], txn_op::create("/assign/a/" + t[0].tid, "{a0}"));
    EXPECT_EQ(ops[4], txn_op::create(l.pending_task(t[1].tid), t[1].data));
    EXPECT_EQ(ops[5], txn_op::create("/assign/a/" + t[2].tid, "{a2}"));  // one check per worker
    EXPECT_EQ(ops[6], txn_op::check("/workers/b", 0));
    EXPECT_EQ(ops[7], txn_op::create("/assign/b/" + t[3].tid, "{b3}"));
    // The logs: the pending shard's, then each worker directory's, naming what was created
    // there with the data written there.
    const auto shard = l.pending_task(t[1].tid).substr(0, l.pending_task(t[1].tid).rfind('/'));
    EXPECT_EQ(ops[8].path, shard);
    EXPECT_EQ(ops[9].path, "/assign/a");
    EXPECT_EQ(ops[10].path, "/assign/b");
    const auto a = zkd::protocol::decode_change_log(ops[9].data);
    ASSERT_TRUE(a);
    ASSERT_EQ(a->created.size(), 2U);
    EXPECT_EQ(a->created[0].name, t[0].tid);
    EXPECT_EQ(a->created[0].data, std::optional<std::string>("{a0}"));
    EXPECT_EQ(a->created[1].name, t[2].tid);
    const auto p = zkd::protocol::decode_change_log(ops[8].data);
    ASSERT_TRUE(p);
    ASSERT_EQ(p->created.size(), 1U);
    EXPECT_EQ(p->created[0].name, t[1].tid);

    // Nothing placed: as without placements.
    EXPECT_EQ(
        launch_ops(l, id, 7, w, std::vector<std::optional<direct_target>>(4)),
        launch_ops(l, id, 7, w)
    );
}

TEST(WorkflowTxn, ALaunchFailureSaysWhetherToRedirect) {
    zkd::protocol::layout l;
    wf_do::write w;
    w.version = 2;
    w.state = "{state}";
    w.creates.push_back({step_task_id(ref, 5, 0), "{}"});
    w.creates.push_back({step_task_id(ref, 5, 1), "{}"});
    std::vector<std::optional<direct_target>> placed(2);
    placed[0] = direct_target{"a", 3, "{a0}"};
    const auto ops = launch_ops(l, id, 7, w, placed);
    using zkd::protocol::op_code;
    EXPECT_EQ(read_launch_failure(ops, 0, op_code::bad_version), launch_failure::deposed);
    EXPECT_EQ(read_launch_failure(ops, 1, op_code::bad_version), launch_failure::other);
    // The worker's check: it left, or wrote its node (draining).
    EXPECT_EQ(read_launch_failure(ops, 2, op_code::no_node), launch_failure::worker_gone);
    EXPECT_EQ(read_launch_failure(ops, 2, op_code::bad_version), launch_failure::worker_gone);
    // Its directory is gone.
    EXPECT_EQ(read_launch_failure(ops, 3, op_code::no_node), launch_failure::worker_gone);
    // The assignment exists: not a worker's doing; read the workflow again.
    EXPECT_EQ(read_launch_failure(ops, 3, op_code::node_exists), launch_failure::other);
    // The pending create, a log, a lost answer.
    EXPECT_EQ(read_launch_failure(ops, 4, op_code::no_node), launch_failure::other);
    EXPECT_EQ(read_launch_failure(ops, ops.size() - 1, op_code::other), launch_failure::other);
    EXPECT_EQ(read_launch_failure(ops, std::nullopt, op_code::other), launch_failure::other);
    EXPECT_EQ(read_launch_failure(ops, ops.size(), op_code::no_node), launch_failure::other);
}

TEST(WorkflowTxn, OnlyAPlainTaskIsPlacedDirectly) {
    const auto tid = step_task_id(ref, 5, 0);
    EXPECT_EQ(
        direct_type(tid, R"({"v":1,"type":"echo","args":1})"), std::optional<std::string>("echo")
    );
    EXPECT_EQ(direct_type(tid, R"({"v":1,"type":"echo","due_ms":1700000000000})"), std::nullopt);
    EXPECT_EQ(direct_type(tid, "garbage"), std::nullopt);
    EXPECT_EQ(direct_type(tid, R"({"v":1,"type":"echo","bundle":[1,2]})"), std::nullopt);
}

TEST(WorkflowTxn, CancelOps) {
    EXPECT_EQ(cancel_request_op(id), txn_op::create(cancel_node(id), ""));
    const auto op = cancel_task_op("t4-1700000000000-abcdef01000000", 9);
    EXPECT_EQ(op.path, "/cancel/t4-1700000000000-abcdef01000000");
    EXPECT_EQ(zkd::protocol::decode_cancel(op.data)->requested_ms, 9);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
