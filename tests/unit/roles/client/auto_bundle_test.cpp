// SPDX-License-Identifier: MIT
// Automatic bundles (roles/client/submit_fsm.hpp, plan_auto_bundles; docs/protocol.md §4.1):
// how the tasks a client held back while its transaction was in flight are grouped into nodes.
#include "protocol/delay.hpp"
#include "roles/client/submit_fsm.hpp"

#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace std::chrono_literals;
namespace json = boost::json;
using groups = std::vector<std::vector<std::size_t>>;

namespace {

protocol::task_spec task(std::string type, json::value args = nullptr, int priority = 5) {
    protocol::task_spec t;
    t.type = std::move(type);
    t.args = std::move(args);
    t.priority = priority;
    return t;
}

std::vector<protocol::task_spec> echoes(std::size_t n) {
    std::vector<protocol::task_spec> out;
    for (std::size_t i = 0; i < n; ++i) {
        out.push_back(task("echo", static_cast<std::int64_t>(i)));
    }
    return out;
}

}  // namespace

TEST(RolesAutoBundle, ALoneTaskIsNeverHeldInABundle) {
    EXPECT_EQ(plan_auto_bundles(echoes(1), 64, 1), (groups{{0}}));
    EXPECT_EQ(plan_auto_bundles(echoes(1), 64, 8), (groups{{0}}));
    EXPECT_EQ(plan_auto_bundles({}, 64, 8), groups{});
}

TEST(RolesAutoBundle, CompatibleConcurrentTasksShareBundlesUpToTheMost) {
    // Ten alike tasks, one worker thread known: bundles of at most 4, in order.
    EXPECT_EQ(plan_auto_bundles(echoes(10), 4, 1), (groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9}}));
    // The most is bounded by what a bundle may hold (§3), and 1 (or 0) bundles nothing.
    EXPECT_EQ(plan_auto_bundles(echoes(3), 0, 1), (groups{{0}, {1}, {2}}));
    EXPECT_EQ(plan_auto_bundles(echoes(3), 1, 1), (groups{{0}, {1}, {2}}));
    const auto big = plan_auto_bundles(echoes(1001), 5000, 1);
    ASSERT_EQ(big.size(), 2U);
    EXPECT_EQ(big[0].size(), protocol::max_bundle_tasks);
}

TEST(RolesAutoBundle, TasksSpreadOverTheThreadsTheClientKnows) {
    // Fewer tasks than threads: each alone, every thread gets one.
    EXPECT_EQ(plan_auto_bundles(echoes(3), 64, 4), (groups{{0}, {1}, {2}}));
    EXPECT_EQ(plan_auto_bundles(echoes(4), 64, 4), (groups{{0}, {1}, {2}, {3}}));
    // More: at least as many nodes as threads, as even as ceil() makes them.
    EXPECT_EQ(plan_auto_bundles(echoes(8), 64, 4), (groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
    EXPECT_EQ(plan_auto_bundles(echoes(5), 64, 2), (groups{{0, 1, 2}, {3, 4}}));
    // Many: the most bounds them.
    const auto many = plan_auto_bundles(echoes(1000), 64, 4);
    EXPECT_EQ(many.size(), 16U);  // ceil(1000 / 64)
    EXPECT_EQ(many.front().size(), 64U);
    // No threads known counts as one.
    EXPECT_EQ(plan_auto_bundles(echoes(3), 64, 0), (groups{{0, 1, 2}}));
}

TEST(RolesAutoBundle, IncompatibleTasksAreNotBundledTogether) {
    std::vector<protocol::task_spec> ts;
    ts.push_back(task("echo", 1));
    ts.push_back(task("sum", json::array{1}));  // another type
    ts.push_back(task("echo", 2, 7));           // another priority
    ts.push_back(task("echo", 3));
    auto timed = task("echo", 4);
    timed.timeout = 5s;  // another timeout
    ts.push_back(timed);
    auto attempts = task("echo", 5);
    attempts.max_attempts = 1;  // other attempts
    ts.push_back(attempts);
    ts.push_back(task("echo", 6));
    // The sets in the order of their first task, each set's tasks in their order.
    EXPECT_EQ(plan_auto_bundles(ts, 64, 1), (groups{{0, 3, 6}, {1}, {2}, {4}, {5}}));
}

TEST(RolesAutoBundle, TasksThatAskForRetriesOrADueTimeGoAlone) {
    auto ts = echoes(4);
    protocol::set_submit_fields(ts[1].timing, std::nullopt, 2, std::nullopt);  // retries
    protocol::set_submit_fields(ts[2].timing, std::nullopt, 0, std::nullopt);  // none: fine
    ts[3].timing["due_ms"] = 1763733600123;
    EXPECT_TRUE(auto_bundle_eligible(ts[0]));
    EXPECT_FALSE(auto_bundle_eligible(ts[1]));
    EXPECT_TRUE(auto_bundle_eligible(ts[2]));
    EXPECT_FALSE(auto_bundle_eligible(ts[3]));
    auto more = echoes(2);
    ts.insert(ts.end(), more.begin(), more.end());
    protocol::set_submit_fields(ts[5].timing, std::nullopt, 3, std::nullopt);
    // Task 2 has "retries":0 in its timing, unlike 0 and 4: alike but for that, its own set.
    EXPECT_EQ(plan_auto_bundles(ts, 64, 1), (groups{{0, 4}, {1}, {2}, {3}, {5}}));
}

TEST(RolesAutoBundle, APlannedGroupPacksIntoOneBundleNode) {
    const auto g = plan_auto_bundles(echoes(3), 64, 1);
    ASSERT_EQ(g.size(), 1U);
    const auto packed = pack_tasks(echoes(3), g[0].size(), "3fa9c2d1", 1763733600123);
    ASSERT_TRUE(packed);
    ASSERT_EQ(packed->size(), 1U);
    EXPECT_EQ(packed->front().bundle, 3U);
}

}  // namespace ZKD_UNITY_ID
