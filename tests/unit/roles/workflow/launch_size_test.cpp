// SPDX-License-Identifier: MIT
// A workflow's W2 is bounded by workflow::launch_bytes, which counts its ops as the
// transaction batcher does (zkco::estimated_size): the two must not drift apart, or the bound
// would let through a multi the batcher or ZooKeeper refuses.
#include "protocol/master_txn.hpp"
#include "roles/txn/zk_ops.hpp"
#include "workflow/txn.hpp"
#include "zkco/types.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

using zkd::protocol::txn_op;

TEST(WorkflowLaunchSize, CountsEveryKindOfOpAsTheBatcherDoes) {
    const std::vector<txn_op> ops{
        txn_op::create("/zkd/ns/pending/3/t-1", std::string(500, 'x')),
        txn_op::create("/zkd/ns/assign/w1/t-2", ""),
        txn_op::set("/zkd/ns/workflows/w/state", std::string(70, 'y'), 4),
        txn_op::remove("/zkd/ns/assign/w1/t-3", 2),
        txn_op::check("/zkd/ns/workers/w1", 7),
    };
    std::size_t batcher = 0;
    for (const auto& op : ops) {
        batcher += zkd::zkco::estimated_size(zkd::roles::to_zkco(op));
    }
    EXPECT_EQ(zkd::workflow::launch_bytes(ops), batcher);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
