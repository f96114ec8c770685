// SPDX-License-Identifier: MIT
// An application's own ops and its tasks in one transaction (roles/client/task_client.hpp,
// task_transaction): the caller's ops first, then the tasks' pending creates, checked as
// submit() checks them, then the change logs the master follows.
#include "roles/client/task_client.hpp"

#include <gtest/gtest.h>

#include <string>
#include <variant>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd;

namespace {

constexpr std::int64_t now = 1763733600123;

protocol::task_spec echo(boost::json::value args) {
    protocol::task_spec t;
    t.type = "echo";
    t.args = std::move(args);
    return t;
}

}  // namespace

TEST(RolesTaskTransaction, OwnOpsThenTasksThenTheirShardsChangeLogs) {
    protocol::layout l;
    l.pending_shards = 4;
    roles::task_transaction txn(l, "3fa9c2d1", now);
    txn.add(zkco::op::create{"/jobs/a", "", zkco::create_mode::persistent, {}});
    const std::string first = "t5-1763733600123-3fa9c2d1000001";
    const std::string second = "t5-1763733600123-3fa9c2d1000002";
    ASSERT_TRUE(txn.add_task(first, echo(1)));
    ASSERT_TRUE(txn.add_task(second, echo(2)));
    // The job names its tasks once they are known.
    std::get<zkco::op::create>(txn.own(0)).data = "job";
    EXPECT_EQ(txn.own_count(), 1U);
    EXPECT_EQ(txn.task_count(), 2U);
    const auto ops = txn.ops();
    ASSERT_GE(ops.size(), 4U);  // at least one change log
    const auto& job = std::get<zkco::op::create>(ops[0]);
    EXPECT_EQ(job.path, "/jobs/a");
    EXPECT_EQ(job.data, "job");
    for (std::size_t i = 1; i <= 2; ++i) {
        const auto& create = std::get<zkco::op::create>(ops[i]);
        EXPECT_EQ(create.path, l.pending_task(i == 1 ? first : second));
        const auto node = protocol::decode_task_node(create.data);
        ASSERT_TRUE(node) << create.data;
        EXPECT_EQ(node->task.client, "3fa9c2d1");
        EXPECT_EQ(node->task.submitted_ms, now);
        EXPECT_EQ(node->task.args, boost::json::value(static_cast<int>(i)));
    }
    for (std::size_t i = 3; i < ops.size(); ++i) {
        EXPECT_TRUE(std::holds_alternative<zkco::op::set>(ops[i]));  // a shard's change log
    }
}

TEST(RolesTaskTransaction, ATaskBreakingARuleIsNotAdded) {
    roles::task_transaction txn(protocol::layout{}, "c", now);
    auto bad = echo(1);
    bad.type = "no spaces";
    const auto r = txn.add_task("t5-1763733600123-3fa9c2d1000001", bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error(), roles::client_condition::invalid_task);
    const auto big = txn.add_task(
        "t5-1763733600123-3fa9c2d1000002", echo(boost::json::value(std::string(600'000, 'x')))
    );
    ASSERT_FALSE(big);
    EXPECT_EQ(big.error(), roles::client_errc::task_too_large);
    EXPECT_EQ(txn.task_count(), 0U);
    EXPECT_TRUE(txn.ops().empty());
}

}  // namespace ZKD_UNITY_ID
