// SPDX-License-Identifier: MIT
// roles::task_key: a pending node's name in 16 bytes, ordered exactly as the names are.
#include "roles/master/detail/task_key.hpp"

#include "protocol/ids.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

namespace ZKD_UNITY_ID {

namespace {

using zkd::roles::task_key;
using zkd::roles::task_key_hash;

// Ids of every shape: priorities, times and counters at their edges, bundles of every
// suffix length, and names that are no task id (they sort among the ids as strings do).
std::vector<std::string> names() {
    std::vector<std::string> out = {
        "t0-0000000000000-00000000000000",
        "t9-9999999999999-ffffffffffffff",
        "t4-1763733600123-3fa9c2d100002a",
        "t4-1763733600123-3fa9c2d100002b",
        "t4-1763733600124-00000000000000",
        "t5-1763733600123-3fa9c2d100002a",
        "t4-1763733600123-3fa9c2d100002a_1",
        "t4-1763733600123-3fa9c2d100002a_9",
        "t4-1763733600123-3fa9c2d100002a_10",
        "t4-1763733600123-3fa9c2d100002a_100",
        "t4-1763733600123-3fa9c2d100002a_1000",
        "t4-1763733600123-3fa9c2d100002a_11",
        "t4-1763733600123-3fa9c2d100002a_2",
        "t4-1763733600123-3fa9c2d100002a_999",
        "t4-1763733600123-3fa9c2d100002a_64",
        "t9-9999999999999-ffffffffffffff_1000",
        // not task ids: garbage, near misses, and names that sort between ids
        "",
        "garbage",
        "t",
        "t4",
        "t4-1763733600123-3fa9c2d100002a_0",
        "t4-1763733600123-3fa9c2d100002a_1001",
        "t4-1763733600123-3fa9c2d100002a_01",
        "t4-1763733600123-3fa9c2d100002a_",
        "t4-1763733600123-3fa9c2d100002a.3",
        "t4-1763733600123-3fa9c2d100002a0",
        "t4-1763733600123-3FA9C2D100002A",
        "t4-1763733600123-3fa9c2d100002",
        "t4-1763733600123-3fa9c2d100002g",
        "t4-176373360012x-3fa9c2d100002a",
        "tA-1763733600123-3fa9c2d100002a",
        "u4-1763733600123-3fa9c2d100002a",
        "s4-1763733600123-3fa9c2d100002a",
        "\xff\xfe",
        "~~~~",
    };
    std::mt19937_64 rng(14);
    std::uniform_int_distribution<int> priority(0, 9);
    std::uniform_int_distribution<std::int64_t> ms(1'763'733'600'000, 1'763'733'600'020);
    std::uniform_int_distribution<std::uint32_t> client(0, 3);
    std::uniform_int_distribution<std::size_t> bundle(0, 1200);
    for (int i = 0; i < 2000; ++i) {
        zkd::protocol::task_id_generator gen(
            client(rng) * 0x40000001U, static_cast<std::uint32_t>(i)
        );
        auto id = gen.next(priority(rng), ms(rng));
        const auto n = bundle(rng);
        if (n > 0 && n <= 1000 && i % 2 == 0) {
            id = zkd::protocol::bundle_id(id, n);
        } else if (n > 1000) {
            id += "_" + std::to_string(n);  // too big: not a bundle id
        }
        out.push_back(std::move(id));
    }
    return out;
}

TEST(TaskKey, NamesComeBackExactly) {
    for (const auto& name : names()) {
        const task_key k(name);
        EXPECT_EQ(k.str(), name);
        EXPECT_EQ(k.compact(), zkd::protocol::is_valid_task_id(name)) << name;
    }
}

TEST(TaskKey, KeysSortAsTheirNamesDo) {
    auto strings = names();
    std::vector<task_key> keys(strings.begin(), strings.end());
    std::sort(strings.begin(), strings.end());
    std::sort(keys.begin(), keys.end());
    ASSERT_EQ(keys.size(), strings.size());
    for (std::size_t i = 0; i < keys.size(); ++i) {
        EXPECT_EQ(keys[i].str(), strings[i]) << "at " << i;
    }
    // Pairwise too: every comparison agrees with the strings', equality included.
    const auto all = names();
    for (std::size_t i = 0; i < 60; ++i) {
        for (std::size_t j = 0; j < all.size(); ++j) {
            const task_key a(all[i]);
            const task_key b(all[j]);
            EXPECT_EQ(a <=> b, all[i] <=> all[j]) << all[i] << " vs " << all[j];
            EXPECT_EQ(a == b, all[i] == all[j]) << all[i] << " vs " << all[j];
        }
    }
}

TEST(TaskKey, AMapOfKeysIsTheQueueInIdOrder) {
    std::map<task_key, int> queue;
    std::set<std::string> expected;
    for (const auto& name : names()) {
        queue.try_emplace(name, 0);
        expected.insert(name);
    }
    ASSERT_EQ(queue.size(), expected.size());
    auto e = expected.begin();
    for (const auto& [key, value] : queue) {
        EXPECT_EQ(key.str(), *e++);
    }
    // Looked up by the names the rest of the code holds.
    EXPECT_TRUE(queue.contains(std::string("t4-1763733600123-3fa9c2d100002a_64")));
    EXPECT_TRUE(queue.contains("garbage"));
    EXPECT_FALSE(queue.contains("t4-1763733600123-3fa9c2d100002a_65"));
}

TEST(TaskKey, EqualKeysHashAlike) {
    std::unordered_set<task_key, task_key_hash> set;
    const auto all = names();
    for (const auto& name : all) {
        set.insert(name);
    }
    const std::set<std::string> distinct(all.begin(), all.end());
    EXPECT_EQ(set.size(), distinct.size());
    for (const auto& name : all) {
        EXPECT_TRUE(set.contains(task_key(name))) << name;
        EXPECT_EQ(task_key_hash{}(task_key(name)), task_key_hash{}(task_key(name)));
    }
    EXPECT_FALSE(set.contains(task_key("t4-1763733600123-3fa9c2d100002c")));
}

TEST(TaskKey, CopiesAndMovesKeepTheName) {
    for (const std::string name : {"t4-1763733600123-3fa9c2d100002a_7", "not an id"}) {
        const task_key a(name);
        task_key b(a);  // copy
        EXPECT_EQ(b.str(), name);
        task_key c(std::move(b));  // move
        EXPECT_EQ(c.str(), name);
        task_key d("t0-0000000000000-00000000000000");
        d = c;  // copy assignment over another form
        EXPECT_EQ(d.str(), name);
        EXPECT_EQ(c.str(), name);
        task_key e("something else");
        e = std::move(d);  // move assignment
        EXPECT_EQ(e.str(), name);
        auto& self = e;
        e = self;  // self assignment
        EXPECT_EQ(e.str(), name);
    }
}

TEST(TaskKey, IsSixteenBytes) {
    EXPECT_EQ(sizeof(task_key), 16U);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
