// SPDX-License-Identifier: MIT
// One nesting limit everywhere (docs/protocol.md §1): what one part of zkd accepts, no other
// part refuses or turns into null.
#include "protocol/task.hpp"
#include "roles/client/inspect.hpp"

#include <boost/json/serialize.hpp>

#include <gtest/gtest.h>

#include <string>

namespace ZKD_UNITY_ID {

using namespace zkd::roles;
using namespace zkd::protocol;
namespace json = boost::json;

namespace {

/// `depth` arrays, one inside the other, around a 1.
std::string nested(std::size_t depth) {
    return std::string(depth, '[') + "1" + std::string(depth, ']');
}

TEST(RolesDepth, ParseJsonTakesTheProtocolsDepthAndNoMore) {
    boost::system::error_code ec;
    parse_json(nested(max_json_depth), ec);
    EXPECT_FALSE(ec) << ec.message();
    parse_json(nested(max_json_depth + 1), ec);
    EXPECT_TRUE(ec);
    parse_json(nested(max_json_depth + 1), ec, 1);  // a wrapper of the caller's own
    EXPECT_FALSE(ec) << ec.message();
}

TEST(RolesDepth, AResultValueDeeperThanBoostsDefaultSurvivesToJson) {
    boost::system::error_code ec;
    task_result r;
    r.task = "t4-1763733600123-3fa9c2d100002a";
    r.state = task_state::succeeded;
    r.value = parse_json(nested(40), ec);  // Boost.JSON's own default stops at 32
    ASSERT_FALSE(ec);
    const auto v = to_json(r);
    ASSERT_TRUE(v.is_object()) << json::serialize(v);
    EXPECT_EQ(v.at("value"), r.value);
}

TEST(RolesDepth, ATaskWithArgsAtTheLimitRoundTrips) {
    boost::system::error_code ec;
    task_spec t;
    t.type = "echo";
    t.args = parse_json(nested(max_json_depth - 1), ec);  // the task object is one level
    ASSERT_FALSE(ec);
    auto back = decode_task_node(encode(t));
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->task.args, t.args);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
