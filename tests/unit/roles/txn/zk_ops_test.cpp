// SPDX-License-Identifier: MIT
// The change logs a transaction sent without a multi_batcher carries (roles/txn/zk_ops.hpp,
// append_change_logs; docs/protocol.md §6): crack's job creation, for one.
#include "roles/txn/zk_ops.hpp"

#include "protocol/task.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd;
namespace op = zkd::zkco::op;

namespace {

zkco::multi_op create(std::string path, std::string data) {
    op::create c;
    c.path = std::move(path);
    c.data = std::move(data);
    return c;
}

protocol::change_log log_of(const zkco::multi_op& o) {
    const auto* s = std::get_if<op::set>(&o);
    EXPECT_NE(s, nullptr);
    if (s == nullptr) {
        return {};
    }
    EXPECT_EQ(s->version, -1);
    auto log = protocol::decode_change_log(s->data);
    EXPECT_TRUE(log) << s->data;
    return log ? *log : protocol::change_log{};
}

}  // namespace

TEST(RolesTxnIo, AppendChangeLogsEndsATransactionWithOneLogPerDirectoryItCreatesIn) {
    std::vector<zkco::multi_op> ops{
        create("/jobs/j", "{}"),  // not a logged directory
        create("/pending/03/t4-1", "a"),
        op::set{"/jobs/j", "x", 1},
        create("/pending/01/t4-2", "b"),
        create("/pending/03/t4-3", "c"),
        create("/pending/05", ""),  // a shard itself: /pending keeps no log
        op::remove{"/pending/07/t4-9", -1},
    };
    const auto before = ops.size();
    roles::append_change_logs(ops);
    ASSERT_EQ(ops.size(), before + 2);
    EXPECT_EQ(std::get<op::set>(ops[before]).path, "/pending/01");
    EXPECT_EQ(log_of(ops[before]).created, (std::vector<protocol::log_entry>{{"t4-2", "b"}}));
    EXPECT_EQ(std::get<op::set>(ops[before + 1]).path, "/pending/03");
    EXPECT_EQ(
        log_of(ops[before + 1]).created,
        (std::vector<protocol::log_entry>{{"t4-1", "a"}, {"t4-3", "c"}})
    );

    std::vector<zkco::multi_op> none{create("/jobs/k", "{}")};
    roles::append_change_logs(none);
    EXPECT_EQ(none.size(), 1U);
}

TEST(RolesTxnIo, AChangeLogCarriesDataWhileTheTransactionsBudgetLasts) {
    const std::string big(protocol::max_log_inline_bytes / 2 + 1, 'x');
    std::vector<zkco::multi_op> ops{
        create("/pending/00/t4-1", big),
        create("/assign/w1/t4-2", big),  // the budget is the transaction's, not a log's
        create("/pending/00/t4-3", "small"),
    };
    roles::append_change_logs(ops);
    ASSERT_EQ(ops.size(), 5U);
    EXPECT_EQ(std::get<op::set>(ops[3]).path, "/assign/w1");
    EXPECT_EQ(log_of(ops[3]).created, (std::vector<protocol::log_entry>{{"t4-2", std::nullopt}}));
    EXPECT_EQ(
        log_of(ops[4]).created, (std::vector<protocol::log_entry>{{"t4-1", big}, {"t4-3", "small"}})
    );
}

// The budget counts data as the log writes it, a JSON string: quotes and escapes included.
TEST(RolesTxnIo, DataIsCountedAsTheJsonStringTheLogHolds) {
    EXPECT_EQ(roles::json_string_bytes(""), 2U);
    EXPECT_EQ(roles::json_string_bytes("abc"), 5U);
    EXPECT_EQ(roles::json_string_bytes(R"({"v":1})"), 7U + 2U + 2U);  // two quotes escaped
    EXPECT_EQ(roles::json_string_bytes("a\\b\n"), 4U + 2U + 2U);
    EXPECT_EQ(roles::json_string_bytes(std::string(1, '\x01')), 1U + 2U + 5U);  // \u0001
    // Fits by its raw size, not as the log holds it: by name only.
    const std::string quotes(protocol::max_log_inline_bytes / 2, '"');
    std::vector<zkco::multi_op> ops{create("/pending/00/t4-1", quotes)};
    roles::append_change_logs(ops);
    EXPECT_EQ(log_of(ops[1]).created, (std::vector<protocol::log_entry>{{"t4-1", std::nullopt}}));
}

// A log never takes a transaction past ZooKeeper's request limit: its data gets only the
// room the ops leave under max_txn_bytes, however much of the budget is left.
TEST(RolesTxnIo, ALogsDataTakesOnlyTheRoomTheTransactionLeaves) {
    const std::string bulk(roles::max_txn_bytes - 100'000, 'b');
    const std::string mid(60'000, 'm');  // well within the budget, not within the room
    std::vector<zkco::multi_op> ops{
        create("/jobs/j", bulk),  // not logged, but in the same request
        create("/pending/00/t4-1", mid),
        create("/pending/00/t4-2", "small"),
    };
    roles::append_change_logs(ops);
    ASSERT_EQ(ops.size(), 4U);
    EXPECT_EQ(
        log_of(ops[3]).created,
        (std::vector<protocol::log_entry>{{"t4-1", std::nullopt}, {"t4-2", "small"}})
    );
    std::size_t total = 0;
    for (const auto& o : ops) {
        total += zkco::estimated_size(o);
    }
    EXPECT_LT(total, roles::max_txn_bytes);
}

}  // namespace ZKD_UNITY_ID
