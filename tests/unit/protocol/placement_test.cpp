// SPDX-License-Identifier: MIT
// Placement policies (docs/protocol.md §7 "Master loop").
#include "protocol/placement.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace ZKD_UNITY_ID {

using namespace zkd::protocol;

namespace {

constexpr placement_policy all_policies[] = {
    placement_policy::least_loaded, placement_policy::round_robin, placement_policy::random};

// A worker_slot views its strings: the test's are kept here for the whole run.
std::span<const std::string> keep(std::vector<std::string> strings) {
    static std::deque<std::vector<std::string>> kept;
    return kept.emplace_back(std::move(strings));
}

worker_slot slot(
    std::string id, int capacity, int used, std::vector<std::string> types, int threads = 1
) {
    return worker_slot{keep({std::move(id)}).front(), capacity, used,
                       keep(std::move(types)),        threads,  {}};
}

// Places `n` tasks of `type` as one transaction (each pick's worker the next one's batch
// mate), counting each pick as a used slot; the worker ids in order.
std::string place_together(
    placer& p, std::vector<worker_slot>& workers, std::string_view type, int n
) {
    std::string order;
    std::string mate;
    for (int i = 0; i < n; ++i) {
        const auto at = p.pick(workers, type, mate);
        if (!at)
            break;
        ++workers[*at].used;
        mate = workers[*at].id;
        order += mate;
    }
    return order;
}

// Places `n` tasks of `type`, counting each pick as a used slot. Returns picks per worker id;
// stops early when nothing is eligible.
std::map<std::string, int> place(
    placer& p, std::vector<worker_slot>& workers, std::string_view type, int n
) {
    std::map<std::string, int> picks;
    for (int i = 0; i < n; ++i) {
        const auto at = p.pick(workers, type);
        if (!at)
            break;
        EXPECT_LT(*at, workers.size());
        auto& w = workers[*at];
        EXPECT_TRUE(w.serves(type)) << w.id;
        EXPECT_LT(w.used, w.capacity) << w.id;
        ++w.used;
        ++picks[std::string(w.id)];
    }
    return picks;
}

TEST(ProtocolPlacement, PolicyNames) {
    EXPECT_EQ(to_string(placement_policy::least_loaded), "least-loaded");
    EXPECT_EQ(to_string(placement_policy::round_robin), "round-robin");
    EXPECT_EQ(to_string(placement_policy::random), "random");
    for (const auto p : all_policies)
        EXPECT_EQ(parse_placement_policy(to_string(p)), p);
    for (const auto* bad : {"", "least_loaded", "Random", "round robin", "fastest"}) {
        EXPECT_FALSE(parse_placement_policy(bad)) << bad;
    }
}

TEST(ProtocolPlacement, WorkerSlot) {
    const auto w = slot("a", 4, 1, {"md5", "sum"});
    EXPECT_EQ(w.free_slots(), 3);
    EXPECT_TRUE(w.serves("sum"));
    EXPECT_TRUE(w.serves("md5"));
    EXPECT_FALSE(w.serves("su"));
    EXPECT_FALSE(w.serves(""));
    EXPECT_EQ(slot("b", 2, 5, {}).free_slots(), 0);  // over capacity after a restart
    EXPECT_EQ(slot("c", 0, 0, {}).free_slots(), 0);
    std::vector<worker_slot> ws{slot("a", 0, 0, {"x"}), slot("b", 1, 1, {"y"})};
    EXPECT_TRUE(anyone_serves(ws, "x"));  // busy or not
    EXPECT_TRUE(anyone_serves(ws, "y"));
    EXPECT_FALSE(anyone_serves(ws, "z"));
    EXPECT_FALSE(anyone_serves({}, "x"));
}

TEST(ProtocolPlacement, AWorkerWhereTheTypeIsUnhealthyGetsNoneOfItButStillServesIt) {
    auto sick = slot("a", 8, 0, {"embed", "sum"});
    sick.unhealthy = keep({"embed"});
    EXPECT_TRUE(sick.serves("embed"));
    EXPECT_FALSE(sick.takes("embed"));
    EXPECT_TRUE(sick.takes("sum"));
    for (const auto policy : all_policies) {
        placer p(policy, 1);
        std::vector<worker_slot> ws{sick, slot("b", 1, 0, {"embed"})};
        EXPECT_EQ(p.pick(ws, "embed"), 1U) << to_string(policy);
        EXPECT_EQ(p.pick(ws, "sum"), 0U) << to_string(policy);
        ws[1].used = 1;  // b is full: the task waits rather than going to a
        EXPECT_FALSE(p.pick(ws, "embed")) << to_string(policy);
        // Still served there: not unknown_type (it waits until the type heals or b has room).
        EXPECT_TRUE(anyone_serves(ws, "embed"));
        std::vector<worker_slot> only{sick};
        EXPECT_TRUE(anyone_serves(only, "embed"));
        EXPECT_FALSE(p.pick(only, "embed")) << to_string(policy);
    }
}

TEST(ProtocolPlacement, NothingEligible) {
    for (const auto policy : all_policies) {
        placer p(policy, 1);
        EXPECT_FALSE(p.pick({}, "sum")) << to_string(policy);
        std::vector<worker_slot> ws{
            slot("a", 2, 2, {"sum"}), slot("b", 4, 0, {"md5"}), slot("c", 0, 0, {"sum"}),
            slot("d", 1, 3, {"sum"})};
        EXPECT_FALSE(p.pick(ws, "sum")) << to_string(policy);
        EXPECT_FALSE(p.pick(ws, "other")) << to_string(policy);
        EXPECT_EQ(p.pick(ws, "md5"), 1U) << to_string(policy);
    }
}

TEST(ProtocolPlacement, NeverExceedsCapacityAndRespectsTypes) {
    for (const auto policy : all_policies) {
        placer p(policy, 42);
        std::vector<worker_slot> ws{
            slot("w1", 3, 0, {"md5", "sum"}), slot("w2", 1, 0, {"sum"}), slot("w3", 5, 2, {"md5"}),
            slot("w4", 2, 0, {"sort", "sum"})};
        auto sums = place(p, ws, "sum", 100);
        EXPECT_EQ(sums, (std::map<std::string, int>{{"w1", 3}, {"w2", 1}, {"w4", 2}}))
            << to_string(policy);
        auto md5s = place(p, ws, "md5", 100);
        EXPECT_EQ(md5s, (std::map<std::string, int>{{"w3", 3}})) << to_string(policy);
        for (const auto& w : ws)
            EXPECT_EQ(w.used, w.capacity) << w.id;
    }
}

TEST(ProtocolPlacement, RoundRobinRotatesInIdOrder) {
    placer p(placement_policy::round_robin, 7);
    // Not in id order in the span: the rotation follows ids, not positions.
    std::vector<worker_slot> ws{
        slot("c", 100, 0, {"t"}), slot("a", 100, 50, {"t"}), slot("b", 100, 0, {"u"}),
        slot("d", 100, 0, {"t"})};
    std::string order;
    for (int i = 0; i < 7; ++i) {
        const auto at = p.pick(ws, "t");
        ASSERT_TRUE(at);
        order += ws[*at].id;
        ++ws[*at].used;
    }
    EXPECT_EQ(order, "acdacda");  // load does not matter, b does not serve "t"

    // A worker joining mid-rotation gets its turn in id order; a full one is skipped.
    ws.push_back(slot("b2", 100, 0, {"t"}));
    ws[0].used = ws[0].capacity;  // "c" is full
    order.clear();
    for (int i = 0; i < 4; ++i) {
        const auto at = p.pick(ws, "t");
        ASSERT_TRUE(at);
        order += std::string(ws[*at].id) + ",";
    }
    EXPECT_EQ(order, "b2,d,a,b2,");
}

TEST(ProtocolPlacement, RoundRobinIsFair) {
    placer p(placement_policy::round_robin, 7);
    std::vector<worker_slot> ws;
    ws.reserve(5);
    for (int i = 0; i < 5; ++i)
        ws.push_back(slot("w" + std::to_string(i), 1000, 0, {"t"}));
    const auto picks = place(p, ws, "t", 1000);
    for (const auto& [id, n] : picks)
        EXPECT_EQ(n, 200) << id;
}

TEST(ProtocolPlacement, LeastLoadedPicksMostFreeSlots) {
    placer p(placement_policy::least_loaded, 7);
    std::vector<worker_slot> ws{
        slot("a", 4, 3, {"t"}), slot("b", 8, 2, {"t"}), slot("c", 4, 0, {"t"}),
        slot("d", 10, 0, {"u"})};
    EXPECT_EQ(p.pick(ws, "t"), 1U);  // b: 6 free
    // As slots fill, the most-free worker changes; everyone ends full.
    const auto picks = place(p, ws, "t", 100);
    EXPECT_EQ(picks, (std::map<std::string, int>{{"a", 1}, {"b", 6}, {"c", 4}}));
}

TEST(ProtocolPlacement, LeastLoadedSpreadsOverEqualWorkers) {
    placer p(placement_policy::least_loaded, 7);
    std::vector<worker_slot> ws;
    for (const auto* id : {"w3", "w1", "w2"})
        ws.push_back(slot(id, 4, 0, {"t"}));
    std::string order;
    for (int i = 0; i < 6; ++i) {
        const auto at = p.pick(ws, "t");
        ASSERT_TRUE(at);
        order += ws[*at].id;
        ++ws[*at].used;
    }
    EXPECT_EQ(order, "w1w2w3w1w2w3");

    // Tasks finishing (used going down) do not make one worker take everything: equal free
    // slots still rotate.
    placer q(placement_policy::least_loaded, 7);
    std::vector<worker_slot> eq{slot("x", 2, 0, {"t"}), slot("y", 2, 0, {"t"})};
    std::map<std::string, int> picks;
    for (int i = 0; i < 100; ++i) {
        const auto at = q.pick(eq, "t");
        ASSERT_TRUE(at);
        ++picks[std::string(eq[*at].id)];  // the task finishes at once: used stays 0
    }
    EXPECT_EQ(picks, (std::map<std::string, int>{{"x", 50}, {"y", 50}}));
}

TEST(ProtocolPlacement, LeastLoadedKeepsATransactionsTasksTogetherUpToAWorkersThreads) {
    const auto idle = [](int threads) {
        std::vector<worker_slot> ws;
        for (const auto* id : {"a", "b", "c", "d"})
            ws.push_back(slot(id, 8, 0, {"t"}, threads));
        return ws;
    };
    {
        // Two threads each: pairs, one per worker, each pair run side by side.
        placer p(placement_policy::least_loaded, 7);
        auto ws = idle(2);
        EXPECT_EQ(place_together(p, ws, "t", 8), "aabbccdd");
    }
    {
        placer p(placement_policy::least_loaded, 7);
        auto ws = idle(3);
        EXPECT_EQ(place_together(p, ws, "t", 8), "aaabbbcc");
    }
    {
        // One thread (what a worker that does not say is taken for): plain least-loaded.
        placer p(placement_policy::least_loaded, 7);
        auto ws = idle(1);
        EXPECT_EQ(place_together(p, ws, "t", 8), "abcdabcd");
    }
    {
        // Tasks of different transactions (no batch mate) spread whatever the threads.
        placer p(placement_policy::least_loaded, 7);
        auto ws = idle(4);
        std::string order;
        for (int i = 0; i < 4; ++i) {
            const auto at = p.pick(ws, "t");
            ASSERT_TRUE(at);
            ++ws[*at].used;
            order += ws[*at].id;
        }
        EXPECT_EQ(order, "abcd");
    }
}

TEST(ProtocolPlacement, ABatchMateIsLeftForTheMostFreeWorkerPastItsThreads) {
    placer p(placement_policy::least_loaded, 7);
    // a, the mate, has 2 threads: kept while it has at most 1 free slot fewer than the most.
    std::vector<worker_slot> ws{slot("a", 8, 1, {"t"}, 2), slot("b", 8, 0, {"t"}, 2)};
    EXPECT_EQ(p.pick(ws, "t", "a"), 0U);  // 7 free against 8
    ws[0].used = 2;
    EXPECT_EQ(p.pick(ws, "t", "a"), 1U);  // 6 against 8: b
    // Busy workers alike: the mate stays within its threads of the most free.
    ws = {slot("a", 8, 6, {"t"}, 2), slot("b", 8, 5, {"t"}, 2)};
    EXPECT_EQ(p.pick(ws, "t", "a"), 0U);
    // A full mate, one that does not serve the type, or one that left: the most free.
    ws = {slot("a", 8, 8, {"t"}, 8), slot("b", 8, 7, {"t"}, 8)};
    EXPECT_EQ(p.pick(ws, "t", "a"), 1U);
    ws = {slot("a", 8, 0, {"u"}, 8), slot("b", 8, 7, {"t", "u"}, 8)};
    EXPECT_EQ(p.pick(ws, "t", "a"), 1U);
    EXPECT_EQ(p.pick(ws, "t", "gone"), 1U);
}

TEST(ProtocolPlacement, OnlyLeastLoadedKeepsToABatchMate) {
    std::vector<worker_slot> ws{slot("a", 8, 0, {"t"}, 8), slot("b", 8, 0, {"t"}, 8)};
    placer rr(placement_policy::round_robin, 7);
    EXPECT_EQ(place_together(rr, ws, "t", 4), "abab");
    ws = {slot("a", 1000, 0, {"t"}, 1000), slot("b", 1000, 0, {"t"}, 1000)};
    placer rnd(placement_policy::random, 7);
    const auto order = place_together(rnd, ws, "t", 200);
    EXPECT_NE(order.find('a'), std::string::npos);
    EXPECT_NE(order.find('b'), std::string::npos);
    EXPECT_NE(order.find("ab"), std::string::npos);  // not all of one after the other
}

TEST(ProtocolPlacement, RandomCoversAllEligible) {
    placer p(placement_policy::random, 12345);
    std::vector<worker_slot> ws{
        slot("a", 1, 0, {"t"}), slot("b", 1, 1, {"t"}), slot("c", 1, 0, {"u"}),
        slot("d", 1, 0, {"t"}), slot("e", 1, 0, {"t"})};
    std::map<std::string, int> picks;
    for (int i = 0; i < 3000; ++i) {
        const auto at = p.pick(ws, "t");  // used unchanged: every pick sees the same slots
        ASSERT_TRUE(at);
        ++picks[std::string(ws[*at].id)];
    }
    ASSERT_EQ(picks.size(), 3U);
    for (const auto* id : {"a", "d", "e"}) {
        EXPECT_GT(picks[id], 850) << id;
        EXPECT_LT(picks[id], 1150) << id;
    }
}

TEST(ProtocolPlacement, DeterministicGivenTheSeed) {
    std::vector<worker_slot> ws;
    ws.reserve(10);
    for (int i = 0; i < 10; ++i)
        ws.push_back(slot("w" + std::to_string(i), 50, i, {"t"}));
    for (const auto policy : all_policies) {
        placer a(policy, 99);
        placer b(policy, 99);
        auto wa = ws;
        auto wb = ws;
        EXPECT_EQ(place(a, wa, "t", 300), place(b, wb, "t", 300)) << to_string(policy);
        EXPECT_EQ(a.policy(), policy);
    }
    // A different seed gives a different random sequence.
    placer c(placement_policy::random, 1);
    placer d(placement_policy::random, 2);
    std::string sc;
    std::string sd;
    for (int i = 0; i < 50; ++i) {
        sc += ws[*c.pick(ws, "t")].id;
        sd += ws[*d.pick(ws, "t")].id;
    }
    EXPECT_NE(sc, sd);
}

}  // namespace

}  // namespace ZKD_UNITY_ID
