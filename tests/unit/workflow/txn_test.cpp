// SPDX-License-Identifier: MIT
// A workflow's nodes and transactions, as ops (docs/protocol.md §11).
#include "workflow/txn.hpp"

#include "protocol/ids.hpp"
#include "protocol/task.hpp"

#include <gtest/gtest.h>

#include <string>

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

TEST(WorkflowTxn, CancelOps) {
    EXPECT_EQ(cancel_request_op(id), txn_op::create(cancel_node(id), ""));
    const auto op = cancel_task_op("t4-1700000000000-abcdef01000000", 9);
    EXPECT_EQ(op.path, "/cancel/t4-1700000000000-abcdef01000000");
    EXPECT_EQ(zkd::protocol::decode_cancel(op.data)->requested_ms, 9);
}

}  // namespace
