// SPDX-License-Identifier: MIT
// The change logs a transaction sent without a multi_batcher carries (roles/txn_io.hpp,
// append_change_logs; docs/protocol.md §6): crack's job creation, for one.
#include "protocol/task.hpp"
#include "roles/txn_io.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
