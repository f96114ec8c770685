// SPDX-License-Identifier: MIT
// Routing keys across cells (protocol/route.hpp, docs/scaling.md).
#include "protocol/route.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;

namespace {

std::vector<std::string> cells(int n) {
    std::vector<std::string> out;
    for (int i = 0; i < n; ++i) {
        out.push_back("zk" + std::to_string(i) + ":2181@cell" + std::to_string(i));
    }
    return out;
}

std::string key(int i) {
    return "customer-" + std::to_string(i);
}

}  // namespace

TEST(Route, TheWeightIsTheDocumentedHash) {
    // docs/scaling.md's example: a third party's implementation must give the same.
    EXPECT_EQ(route_weight("zk1:2181@orders", "customer-42"), 11415950495468656673ULL);
    EXPECT_EQ(route_weight("", ""), 2737183428366584608ULL);
    EXPECT_NE(route_weight("a", "bc"), route_weight("ab", "c")) << "the 0 byte separates them";
}

TEST(Route, AKeyGoesToOneCellWhateverTheOrderOfTheCells) {
    auto four = cells(4);
    auto reversed = four;
    std::reverse(reversed.begin(), reversed.end());
    for (int i = 0; i < 1000; ++i) {
        const auto a = pick_cell(key(i), four);
        EXPECT_EQ(a, pick_cell(key(i), four));
        EXPECT_EQ(four[a], reversed[pick_cell(key(i), reversed)]) << key(i);
    }
    EXPECT_EQ(pick_cell("x", {}), 0U);
    EXPECT_EQ(pick_cell("x", cells(1)), 0U);
}

TEST(Route, KeysSpreadEvenly) {
    const auto four = cells(4);
    std::map<std::size_t, int> count;
    for (int i = 0; i < 20000; ++i) {
        ++count[pick_cell(key(i), four)];
    }
    ASSERT_EQ(count.size(), 4U);
    for (const auto& [cell, n] : count) {
        EXPECT_GT(n, 4500) << four[cell];
        EXPECT_LT(n, 5500) << four[cell];
    }
}

TEST(Route, AddingACellMovesOnlyTheKeysItWinsAndRemovingOneOnlyItsOwn) {
    const auto four = cells(4);
    const auto five = cells(5);
    int moved = 0;
    for (int i = 0; i < 20000; ++i) {
        const auto& before = four[pick_cell(key(i), four)];
        const auto& after = five[pick_cell(key(i), five)];
        if (before != after) {
            ++moved;
            EXPECT_EQ(after, five[4]) << key(i) << " moved between old cells";
        }
    }
    EXPECT_GT(moved, 3400) << "about a fifth move";
    EXPECT_LT(moved, 4600);

    auto three = four;
    three.erase(three.begin() + 1);
    for (int i = 0; i < 20000; ++i) {
        const auto& before = four[pick_cell(key(i), four)];
        const auto& after = three[pick_cell(key(i), three)];
        if (before != four[1]) {
            EXPECT_EQ(before, after) << key(i) << " moved, its cell still there";
        }
    }
}

}  // namespace ZKD_UNITY_ID
