// SPDX-License-Identifier: MIT
// How a submit packs its tasks into nodes (roles/client/submit_fsm.hpp, pack_tasks): each task
// checked and stamped with its client and time, consecutive alike tasks bundled while they fit.
#include "roles/client/submit_fsm.hpp"

#include <boost/json/value.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <limits>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd;
using namespace zkd::roles;
using namespace std::chrono_literals;
namespace json = boost::json;

namespace {

constexpr std::int64_t now = 1763733600123;

protocol::task_spec task(std::string type, json::value args, int priority = 5) {
    protocol::task_spec t;
    t.type = std::move(type);
    t.args = std::move(args);
    t.priority = priority;
    return t;
}

}  // namespace

TEST(RolesPackTasks, EachTaskAloneIsItsEncodingWithTheClientAndTheTime) {
    auto t = task("echo", "x", 7);
    t.submitted_ms = 1;   // replaced: the client's to fill
    t.client = "not me";  // replaced too
    const auto packed = pack_tasks({t, task("echo", "y")}, 1, "3fa9c2d1", now);
    ASSERT_TRUE(packed);
    ASSERT_EQ(packed->size(), 2U);
    auto expected = t;
    expected.submitted_ms = now;
    expected.client = "3fa9c2d1";
    EXPECT_EQ((*packed)[0], (packed_node{protocol::encode(expected), "echo", 7, now, 0}));
    EXPECT_EQ((*packed)[1].priority, 5);
    EXPECT_EQ((*packed)[1].bundle, 0U);
}

TEST(RolesPackTasks, AlikeNeighboursShareABundleUpToItsSize) {
    std::vector<protocol::task_spec> tasks;
    for (int i = 0; i < 5; ++i) {
        tasks.push_back(task("sum", json::array{i}));
    }
    tasks.push_back(task("sum", json::array{9}, 6));  // another priority: a node of its own
    tasks.push_back(task("echo", "z"));
    const auto packed = pack_tasks(tasks, 3, "c", now);
    ASSERT_TRUE(packed);
    ASSERT_EQ(packed->size(), 4U);
    EXPECT_EQ((*packed)[0].bundle, 3U);
    EXPECT_EQ((*packed)[1].bundle, 2U);
    EXPECT_EQ((*packed)[2].bundle, 0U);
    EXPECT_EQ((*packed)[2].priority, 6);
    EXPECT_EQ((*packed)[3].type, "echo");
    const auto first = protocol::decode_task_node((*packed)[0].data);
    ASSERT_TRUE(first);
    EXPECT_EQ(
        first->task.bundle,
        (std::vector<json::value>{json::array{0}, json::array{1}, json::array{2}})
    );
    EXPECT_TRUE(first->task.args.is_null());
    EXPECT_EQ(first->task.client, "c");
}

TEST(RolesPackTasks, AClientThatReadsEarlyResultsSaysSoInEachBundleOnly) {
    std::vector<protocol::task_spec> tasks;
    for (int i = 0; i < 3; ++i) {
        tasks.push_back(task("sum", json::array{i}));
    }
    tasks.push_back(task("echo", "z"));
    const auto packed = pack_tasks(tasks, 3, "c", now, true);
    ASSERT_TRUE(packed);
    ASSERT_EQ(packed->size(), 2U);
    const auto bundle = protocol::decode_task_node((*packed)[0].data);
    ASSERT_TRUE(bundle);
    EXPECT_TRUE(bundle->task.entry_results);
    EXPECT_EQ((*packed)[1].data.find("entry_results"), std::string::npos);  // a plain task

    const auto without = pack_tasks(tasks, 3, "c", now);
    ASSERT_TRUE(without);
    EXPECT_EQ((*without)[0].data.find("entry_results"), std::string::npos);
}

TEST(RolesPackTasks, ABundleStopsWhereTheNodeWouldBeTooLarge) {
    const std::string third(200 * 1024, 'x');
    std::vector<protocol::task_spec> tasks(4, task("echo", json::value(third)));
    const auto packed = pack_tasks(tasks, 64, "c", now);
    ASSERT_TRUE(packed);
    ASSERT_EQ(packed->size(), 2U);  // two per node fit 512 KiB, three do not
    EXPECT_EQ((*packed)[0].bundle, 2U);
    EXPECT_EQ((*packed)[1].bundle, 2U);
    for (const auto& n : *packed) {
        EXPECT_TRUE(protocol::task_size_ok(n.data));
    }
}

TEST(RolesPackTasks, TooDeepForABundleGoesAlone) {
    json::value deep = 1;
    for (std::size_t i = 0; i + 1 < protocol::max_json_depth; ++i) {
        deep = json::array{deep};
    }
    const auto packed = pack_tasks({task("echo", deep), task("echo", deep)}, 8, "c", now);
    ASSERT_TRUE(packed);
    ASSERT_EQ(packed->size(), 2U);
    EXPECT_EQ((*packed)[0].bundle, 0U);
    EXPECT_EQ((*packed)[0].type, "echo");
    EXPECT_TRUE(protocol::decode_task_node((*packed)[1].data));
}

TEST(RolesPackTasks, TheFirstBrokenRuleRefusesTheWholeCall) {
    EXPECT_EQ(
        pack_tasks({task("echo", 1), task("bad type", 1)}, 1, "c", now).error(),
        client_errc::invalid_type
    );
    EXPECT_EQ(
        pack_tasks({task("echo", 1, 10)}, 1, "c", now).error(), client_errc::invalid_priority
    );
    // Checked in a bundle too, not only as its first task.
    const auto late = task("echo", json::value(std::numeric_limits<double>::infinity()));
    EXPECT_EQ(pack_tasks({task("echo", 1), late}, 8, "c", now).error(), client_errc::invalid_args);
    EXPECT_EQ(
        pack_tasks({task("echo", json::value(std::string(600'000, 'x')))}, 1, "c", now).error(),
        client_errc::task_too_large
    );
    auto made = task("echo", nullptr);
    made.bundle = {1, 2};
    EXPECT_EQ(pack_tasks({made}, 8, "c", now).error(), client_errc::invalid_args);
    EXPECT_TRUE(pack_tasks({}, 8, "c", now));
}

TEST(RolesPackTasks, TheTimingOfDelaysAndRetriesGoesInTheNodeAndSplitsBundles) {
    // §4.3's fields as a submit sets them (protocol::set_submit_fields): in the node after
    // the task's other members; tasks that differ in them never share a node.
    auto later = task("echo", 1);
    later.timing["due_ms"] = 1763733700000;
    later.timing["retries"] = 2;
    auto same = later;
    same.args = 2;
    auto other = later;
    other.args = 3;
    other.timing["retries"] = 3;
    const auto packed = pack_tasks({later, same, other, task("echo", 4)}, 8, "c", now);
    ASSERT_TRUE(packed);
    ASSERT_EQ(packed->size(), 3U);
    EXPECT_EQ((*packed)[0].bundle, 2U);
    EXPECT_EQ((*packed)[1].bundle, 0U);
    EXPECT_EQ((*packed)[2].bundle, 0U);
    const auto first = protocol::decode_task_node((*packed)[0].data);
    ASSERT_TRUE(first) << (*packed)[0].data;
    EXPECT_EQ(first->task.timing, later.timing);
    EXPECT_NE(
        (*packed)[0].data.find(R"("client":"c","due_ms":1763733700000,"retries":2})"),
        std::string::npos
    ) << (*packed)[0].data;
    const auto plain = protocol::decode_task_node((*packed)[2].data);
    ASSERT_TRUE(plain);
    EXPECT_TRUE(plain->task.timing.empty());
}

}  // namespace ZKD_UNITY_ID
