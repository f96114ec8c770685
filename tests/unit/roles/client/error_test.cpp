// SPDX-License-Identifier: MIT
// A refused submit names the rule the task broke (roles/client/error.hpp), and every such
// code still reads as an invalid task.
#include "roles/client/error.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <limits>

namespace ZKD_UNITY_ID {

using namespace zkd::roles;
namespace protocol = zkd::protocol;

namespace {

protocol::task_spec fine() {
    protocol::task_spec t;
    t.type = "echo";
    t.args = 1;
    return t;
}

client_errc rule_of(const protocol::task_spec& t) {
    auto ok = protocol::validate(t);
    EXPECT_FALSE(ok) << "the spec should break a rule";
    return ok ? client_errc{} : broken_rule(ok.error());
}

TEST(ClientError, EachBrokenRuleHasItsCode) {
    ASSERT_TRUE(protocol::validate(fine()));
    auto t = fine();
    t.type = "bad type!";
    EXPECT_EQ(rule_of(t), client_errc::invalid_type);
    t = fine();
    t.priority = protocol::max_priority + 1;
    EXPECT_EQ(rule_of(t), client_errc::invalid_priority);
    t = fine();
    t.timeout = std::chrono::milliseconds(-1);
    EXPECT_EQ(rule_of(t), client_errc::invalid_timeout);
    t = fine();
    t.max_attempts = 0;
    EXPECT_EQ(rule_of(t), client_errc::invalid_max_attempts);
    t = fine();
    t.args = std::numeric_limits<double>::infinity();
    EXPECT_EQ(rule_of(t), client_errc::invalid_args);
}

TEST(ClientError, EveryBrokenRuleIsAnInvalidTaskAndSaysItsRule) {
    for (const auto e :
         {client_errc::invalid_type, client_errc::invalid_priority, client_errc::invalid_timeout,
          client_errc::invalid_max_attempts, client_errc::invalid_args}) {
        const boost::system::error_code ec = e;
        EXPECT_EQ(ec, client_condition::invalid_task) << ec.message();
        EXPECT_NE(ec.message().find("invalid task: "), std::string::npos);
    }
    const boost::system::error_code ec = client_errc::invalid_priority;
    EXPECT_NE(ec.message().find("from 0 to 9"), std::string::npos) << ec.message();
    for (const auto e :
         {client_errc::task_too_large, client_errc::garbage_result, client_errc::queue_full}) {
        const boost::system::error_code other = e;
        EXPECT_NE(other, client_condition::invalid_task) << other.message();
    }
}

}  // namespace

}  // namespace ZKD_UNITY_ID
